#!/usr/bin/env bash
# Local PostgreSQL for development and tests.
#
#   scripts/db.sh setup     make sure PostgreSQL listens on $DB_HOST:$DB_PORT and
#                           the development database $DB_NAME exists
#   scripts/db.sh teardown  stop and delete the project-local server, if this
#                           script started one (a machine's own server is left alone)
#
# When nothing listens on the port: start the machine's Debian cluster if it has
# one on that port (pg_ctlcluster), otherwise initdb + pg_ctl into .local/pgdata.
set -euo pipefail

DB_HOST=${DB_HOST:-127.0.0.1}
DB_PORT=${DB_PORT:-5432}
DB_USER=${DB_USER:-postgres}
DB_NAME=${DB_NAME:-fleet_manager}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${PGDATA_DIR:-$ROOT/.local/pgdata}

log() { echo "db.sh: $*" >&2; }

listening() { pg_isready -q -h "$DB_HOST" -p "$DB_PORT" -t 2; }

pg_bindir() {
  if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] || { log "no PostgreSQL server binaries found (Debian: apt-get install postgresql)"; exit 1; }
  echo "$dir"
}

# as_owner runs a command as the postgres user when we are root (PostgreSQL
# refuses to run as root), as ourselves otherwise.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_debian_cluster() {
  command -v pg_lsclusters >/dev/null || return 1
  local line
  line=$(pg_lsclusters --no-header 2>/dev/null | awk -v p="$DB_PORT" '$3 == p {print $1, $2; exit}')
  [ -n "$line" ] || return 1
  log "starting the Debian cluster $line on port $DB_PORT"
  # shellcheck disable=SC2086
  pg_ctlcluster --skip-systemctl-redirect $line start
}

start_local() {
  local bin
  bin=$(pg_bindir)
  mkdir -p "$DATA" "$ROOT/.local/pgsock"
  [ "$(id -u)" = 0 ] && chown postgres: "$DATA" "$ROOT/.local/pgsock"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "initdb into $DATA"
    as_owner "$bin/initdb" -A trust -U "$DB_USER" -D "$DATA" >/dev/null
  fi
  log "starting a local server on $DB_HOST:$DB_PORT"
  # autovacuum and track_counts as a production server runs them (fleet-manager
  # doctor reports a server without them), whatever a copied configuration says.
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-p $DB_PORT -c listen_addresses=$DB_HOST -k $ROOT/.local/pgsock -c autovacuum=on -c track_counts=on" start >/dev/null
}

wait_listening() {
  for _ in $(seq 1 60); do
    listening && return 0
    sleep 0.5
  done
  log "PostgreSQL did not come up on $DB_HOST:$DB_PORT"
  exit 1
}

setup() {
  if ! listening; then
    start_debian_cluster || start_local
    wait_listening
  fi
  if ! psql -h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'" | grep -q 1; then
    log "creating database $DB_NAME"
    psql -h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d postgres -qc "CREATE DATABASE $DB_NAME" >/dev/null
  fi
  log "PostgreSQL ready on $DB_HOST:$DB_PORT, database $DB_NAME"
}

teardown() {
  if [ -f "$DATA/postmaster.pid" ]; then
    as_owner "$(pg_bindir)/pg_ctl" -D "$DATA" -w stop >/dev/null
    log "stopped the local server"
  fi
  rm -rf "$DATA" "$ROOT/.local/pgsock"
  log "removed $DATA (a machine's own server, if any, is untouched)"
}

case "${1:-}" in
  setup) setup ;;
  teardown) teardown ;;
  *) echo "usage: $0 setup|teardown" >&2; exit 2 ;;
esac
