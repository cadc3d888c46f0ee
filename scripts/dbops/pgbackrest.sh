#!/usr/bin/env bash
# Backups and point-in-time recovery of the fleet manager's database with
# pgBackRest (Debian's pgbackrest). A thin, checked wrapper: every setting
# is pgBackRest's own, read from its configuration file (--config or
# PGBACKREST_CONFIG) and its PGBACKREST_* environment variables, so nothing
# here names a host, a bucket or a path. docs/database-recovery.md is the
# procedure; scripts/dbops/pgbackrest.conf.example a production configuration.
#
#   pgbackrest.sh [--config=FILE] [--stanza=NAME] COMMAND [ARGS]
#
#   settings                 print the PostgreSQL settings WAL archiving needs
#                            (postgresql.conf lines), for this config and stanza
#   setup                    validate the configuration, stanza-create, check
#   check                    check the repository and WAL archiving
#   backup full|diff|incr    take a backup (extra pgBackRest options follow)
#   info [--output=json]     list the backups and the archived WAL
#   restore --pg1-path=DIR [--target-time=TIMESTAMP] [OPTIONS]
#                            restore into DIR, a fresh (empty or missing) data
#                            directory: the latest backup and every archived
#                            WAL, or, with --target-time, up to that moment
#                            (--type=time --target-action=promote)
#
# Run as root, it runs pgBackRest as the database's operating-system user
# (PGBACKREST_OS_USER, default postgres), as pgBackRest must be.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "pgbackrest.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --config=*) export PGBACKREST_CONFIG="${1#*=}"; shift ;;
    --stanza=*) export PGBACKREST_STANZA="${1#*=}"; shift ;;
    -h|--help) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
command="$1"
shift

command -v pgbackrest >/dev/null || die "pgbackrest is not installed: run scripts/dbops/ensure-tools.sh"
[ -n "${PGBACKREST_STANZA:-}" ] || die "no stanza: pass --stanza=NAME or set PGBACKREST_STANZA"
if [ -n "${PGBACKREST_CONFIG:-}" ] && [ ! -r "$PGBACKREST_CONFIG" ]; then
  die "configuration file $PGBACKREST_CONFIG is missing or unreadable (PGBACKREST_CONFIG / --config)"
fi

# As root, run again as the database's user, keeping the environment (runuser
# without -l changes only HOME, SHELL, USER and LOGNAME).
if [ "$(id -u)" = 0 ]; then
  os_user="${PGBACKREST_OS_USER:-postgres}"
  id "$os_user" >/dev/null 2>&1 || die "no operating-system user $os_user to run pgBackRest as (PGBACKREST_OS_USER)"
  exec runuser -u "$os_user" -- "$0" "$command" "$@"
fi

# pgbr runs pgBackRest with the configuration and stanza on its command line:
# restore writes them into restore_command, which the server runs in an
# environment of its own.
pgbr() {
  local named=()
  [ -n "${PGBACKREST_CONFIG:-}" ] && named+=("--config=$PGBACKREST_CONFIG")
  named+=("--stanza=$PGBACKREST_STANZA")
  echo "+ pgbackrest ${named[*]} $*" >&2
  pgbackrest "${named[@]}" "$@"
}

# config_args are the options that name the configuration to a command the
# server runs (archive_command, restore_command), whose environment may differ.
config_args() {
  [ -n "${PGBACKREST_CONFIG:-}" ] && printf -- '--config=%q ' "$PGBACKREST_CONFIG"
  printf -- '--stanza=%q' "$PGBACKREST_STANZA"
}

case "$command" in
  settings)
    cat <<EOF
wal_level = replica
archive_mode = on
archive_command = 'pgbackrest $(config_args) archive-push %p'
archive_timeout = 60
max_wal_senders = 3
EOF
    ;;
  setup)
    # A stanza names one database cluster; its options must say where the
    # data directory and the repository are before anything is written.
    pgbr info >/dev/null || die "pgBackRest cannot read its configuration (see above)"
    pgbr stanza-create "$@"
    pgbr check
    ;;
  check)
    pgbr check "$@"
    ;;
  backup)
    [ $# -ge 1 ] || die "backup needs a type: full, diff or incr"
    type="$1"
    shift
    case "$type" in full|diff|incr) ;; *) die "backup type $type: want full, diff or incr" ;; esac
    pgbr backup --type="$type" "$@"
    ;;
  info)
    pgbr info "$@"
    ;;
  restore)
    target_time="" pg_path="" rest=()
    for arg in "$@"; do
      case "$arg" in
        --target-time=*) target_time="${arg#*=}" ;;
        --pg1-path=*) pg_path="${arg#*=}"; rest+=("$arg") ;;
        *) rest+=("$arg") ;;
      esac
    done
    [ -n "$pg_path" ] || die "restore needs --pg1-path=DIR, the fresh data directory to restore into"
    if [ -d "$pg_path" ] && [ -n "$(ls -A "$pg_path")" ]; then
      die "restore into $pg_path: the directory is not empty; restore into a fresh data directory"
    fi
    if [ -n "$target_time" ]; then
      rest+=(--type=time "--target=$target_time" --target-action=promote)
    fi
    pgbr restore "${rest[@]}"
    ;;
  *)
    echo "pgbackrest.sh: unknown command $command" >&2
    usage
    ;;
esac
