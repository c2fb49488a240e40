# usage: stall.sh clients seconds outdir
. /tmp/exp/env.sh
c=$1; T=$2; O=$3; mkdir -p $O; chmod 777 $O
q 'VACUUM' ; q 'CHECKPOINT'
as_server_user pgbench -h $E -p $PORT -n -f $E/update.sql -s 25 -c $c -j $c -T 10 postgres >/dev/null 2>&1
q 'SELECT pg_reload_conf()'; sleep 1
q 'SELECT bgw_jit_reset(); SELECT pg_stat_statements_reset()' >/dev/null
W=$(q 'SELECT pid FROM bgw_jit_stats')
t0=$(date +%s.%N)
b0=$(q 'SELECT coalesce(sum(shared_blks_written),0) FROM pg_stat_statements')
w0=$(awk '/^wchar/{print $2}' /proc/$W/io)
perf record -q -o $O/perf.data -a -g -e sched:sched_switch --filter "prev_pid == $W || next_pid == $W" -- sleep $((T+1)) 2>/dev/null &
PP=$!
as_server_user pgbench -h $E -p $PORT -n -f $E/update.sql -s 25 -c $c -j $c -T $T -P 1 postgres > $O/pgbench.out 2>&1
b1=$(q 'SELECT coalesce(sum(shared_blks_written),0) FROM pg_stat_statements')
w1=$(awk '/^wchar/{print $2}' /proc/$W/io)
wait $PP
echo "worker=$W backend_writes=$((b1-b0)) worker_pages=$(( (w1-w0)/8192 ))" | tee $O/counts.txt
grep -E "^tps|latency average" $O/pgbench.out
psql_ -c "\\copy (SELECT *, extract(epoch FROM at) AS at_epoch FROM bgw_jit_history WHERE at >= to_timestamp($t0) ORDER BY cycle) TO STDOUT WITH (FORMAT csv, HEADER)" > $O/history.csv
