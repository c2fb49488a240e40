#!/bin/bash
# samples wait events and WAL counters from the bench server every 0.2 s
out=/tmp/samp/waits.log
while [ ! -e /tmp/samp/stop ]; do
	sock=$(ls -d /tmp/bgw_jit_bench.*/.s.PGSQL.54400 2>/dev/null | head -1)
	if [ -z "$sock" ]; then sleep 0.5; continue; fi
	dir=$(dirname "$sock")
	su postgres -c "psql -h $dir -p 54400 -d postgres -X -At -F'|' -q" <<'SQL' >> $out 2>/dev/null
\set ON_ERROR_STOP 0
SELECT 'W', extract(epoch from now())::numeric(14,1), backend_type, coalesce(wait_event_type,'CPU'), coalesce(wait_event,'-'), count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (backend_type <> 'client backend' OR state = 'active') GROUP BY 1,2,3,4,5 UNION ALL SELECT 'L', extract(epoch from now())::numeric(14,1), 'wal', wal_fpi||','||wal_bytes, wal_buffers_full||','||wal_write||','||wal_sync, 0 FROM pg_stat_wal \watch 0.2
SQL
	sleep 0.5
done
