#!/usr/bin/env bash
# Churns an inventory the way agents do and prints, a line a round, what
# autovacuum makes of it: the measurement of docs/database-maintenance.md.
#
#   scripts/dbops/churn-inventory.sh DB [ROUNDS] [FRACTION] [PAUSE]
#
# Each round changes the content of FRACTION of managed_clusters' live rows
# (as an agent's batch with changed hashes does: a new content_hash, the
# change position moved by the table's trigger), then samples the table's
# live and dead rows, (auto)vacuum and analyze counts, sizes and the share of
# its pages the visibility map holds all-visible. PGHOST, PGPORT and PGUSER
# say where the database is (psql's defaults otherwise).
set -euo pipefail
db=$1; rounds=${2:-60}; frac=${3:-0.01}; pause=${4:-5}
P="psql -d $db -At -F, -v ON_ERROR_STOP=1"
echo "round,t,live,dead,autovacuums,autoanalyzes,heap_mb,total_mb,allvisible_pct"
for r in $(seq 1 $rounds); do
  $P -qc "update managed_clusters set content_hash = md5(random()::text), updated_at = now() where id in (select id from managed_clusters where deleted_at is null and random() < $frac)" >/dev/null
  $P -c "select $r, extract(epoch from clock_timestamp())::int, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, pg_relation_size(relid)/1048576, pg_total_relation_size(relid)/1048576, round(100.0*c.relallvisible/greatest(c.relpages,1)) from pg_stat_user_tables s join pg_class c on c.oid = s.relid where s.relname = 'managed_clusters'"
  sleep $pause
done
