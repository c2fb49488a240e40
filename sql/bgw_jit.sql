--
-- bgw_jit: the SQL surface (run with the library preloaded)
--
CREATE EXTENSION bgw_jit;
-- (what a plain CREATE EXTENSION installs is the default version)
CREATE TEMP TABLE default_version AS
    SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit';
SELECT * FROM default_version;

-- Columns and types of the views.
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_stats'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_history'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_advice'::regclass AND attnum > 0
 ORDER BY attnum;

-- cleaner_pct = 100 * buf_clean / (buf_clean + buf_backend) and
-- redirtied_pct = 100 * redirtied / (evicted + redirtied), rounded to 2
-- decimals (numeric: 0.125 gives 0.13), NULL with nothing to divide:
-- the view's own definition run over made-up counters.  (The writes of
-- jit+all's all-buffers scan, buf_all_clean, are not in cleaner_pct.)
CREATE TEMP TABLE made_up_stats AS SELECT * FROM bgw_jit_stats() LIMIT 0;
INSERT INTO made_up_stats (buf_clean, buf_all_clean, buf_backend,
                           buf_clean_evicted, buf_clean_redirtied)
VALUES (0, 0, 0, 0, 0), (0, 0, 5, 3, 1), (1, 0, 2, 0, 2), (2, 0, 1, 2, 1),
       (1, 100, 7, 1, 0), (7, 0, 0, 0, 0), (1, 0, 799, 0, 0),
       (1, 0, 2000000, 1, 2);
SELECT replace(pg_get_viewdef('bgw_jit_stats'), 'bgw_jit_stats()',
               'pg_temp.made_up_stats') AS made_up_stats_view \gset
CREATE TEMP VIEW made_up_view AS :made_up_stats_view
SELECT buf_clean, buf_all_clean, buf_backend, cleaner_pct,
       buf_clean_evicted AS evicted, buf_clean_redirtied AS redirtied,
       redirtied_pct
  FROM made_up_view ORDER BY buf_clean, buf_backend;

-- bgw_jit_bgwriter has the same columns on every server version (15's
-- pg_stat_bgwriter), among them every column of this server's
-- pg_stat_bgwriter with its type.
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_bgwriter'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT count(*) AS pg_stat_bgwriter_columns_missing
  FROM pg_attribute s
 WHERE s.attrelid = 'pg_stat_bgwriter'::regclass AND s.attnum > 0
   AND NOT EXISTS (SELECT FROM pg_attribute v
                    WHERE v.attrelid = 'bgw_jit_bgwriter'::regclass
                      AND v.attname = s.attname AND v.atttypid = s.atttypid);
-- The server's figures behind it are pg_stat_bgwriter's, and from 17
-- pg_stat_checkpointer's; the columns no view of this server has are NULL
-- (from 17: buffers_backend, buffers_backend_fsync; expected/bgw_jit_1.out).
SELECT (SELECT to_jsonb(s) FROM pg_stat_bgwriter s) <@ to_jsonb(c)
       AS core_is_pg_stat_bgwriter
  FROM bgw_jit_core_bgwriter() c;
CREATE FUNCTION pg_temp.core_is_pg_stat_checkpointer() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    ok boolean := true;
BEGIN
    IF current_setting('server_version_num')::integer >= 170000 THEN
        EXECUTE $q$
            SELECT c.checkpoints_timed = k.num_timed
                   AND c.checkpoints_req = k.num_requested
                   AND c.checkpoint_write_time = k.write_time
                   AND c.checkpoint_sync_time = k.sync_time
                   AND c.buffers_checkpoint = k.buffers_written
              FROM bgw_jit_core_bgwriter() c, pg_stat_checkpointer k
        $q$ INTO ok;
    END IF;
    RETURN ok;
END
$$;
SELECT pg_temp.core_is_pg_stat_checkpointer();
SELECT key AS null_on_this_server
  FROM bgw_jit_bgwriter v, jsonb_each(to_jsonb(v))
 WHERE value = 'null'
 ORDER BY key;
-- Its share of a statistics period the worker never saw is nothing.
SELECT buffers_clean, maxwritten_clean, coalesce(buffers_backend, 0) AS backend
  FROM bgw_jit_bgwriter('2000-01-01 00:00:00+00');

-- Wait up to 60 s for a condition on the worker's shared state (read
-- afresh at every call, also inside one transaction); false on timeout.
CREATE FUNCTION pg_temp.wait_for(cond text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXECUTE 'SELECT ' || cond INTO ok;
        IF ok THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END
$$;

-- The worker runs and publishes its cycles.
SELECT pg_temp.wait_for('last_cycle_at > pg_postmaster_start_time()
                         FROM bgw_jit_stats') AS worker_published;
-- bgw_jit_stats.pid (1.3) is the worker's process id.
SELECT pid IS NOT NULL AND pid <> pg_backend_pid() AS worker_pid_shown
  FROM bgw_jit_stats;
-- buf_backend_at (1.3): when the worker last read the backends' writes
-- (from 16 it samples pg_stat_io about once a second).
SELECT pg_temp.wait_for('buf_backend_at > pg_postmaster_start_time()
                         AND buf_backend_at <= clock_timestamp()
                         FROM bgw_jit_stats') AS backend_writes_read;
-- An idle server with the defaults: nothing to advise.
SELECT * FROM bgw_jit_advice;

-- Reset: stats_reset moves, and the history restarts at cycle 1 with
-- cycles that all began after the reset.
SELECT pg_temp.wait_for('cycles >= 2 FROM bgw_jit_stats') AS cycled;
SELECT clock_timestamp() AS before_reset \gset
SELECT bgw_jit_reset();
SELECT stats_reset >= :'before_reset' AS reset_moved FROM bgw_jit_stats;
SELECT pg_temp.wait_for('cycles >= 2 FROM bgw_jit_stats') AS cycled_again;
SELECT min(h.cycle) = 1 AS numbered_from_1,
       max(h.cycle) = count(*) AS contiguous,
       bool_and(h.at >= s.stats_reset) AS all_after_reset
  FROM bgw_jit_history h, bgw_jit_stats s;

-- Before any write (the worker disabled, the counters just reset) there
-- is no share to give: cleaner_pct and redirtied_pct are NULL.
ALTER SYSTEM SET bgw_jit.enabled = off;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;
SELECT bgw_jit_reset();
SELECT buf_clean, buf_all_clean, buf_backend, cleaner_pct, redirtied_pct
  FROM bgw_jit_stats;
ALTER SYSTEM RESET ALL;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;

-- Privileges: statistics for everyone, reset only when granted.
CREATE ROLE regress_bgw_jit_user;
SET ROLE regress_bgw_jit_user;
SELECT count(*) FROM bgw_jit_stats;
SELECT count(*) > 0 AS history_readable FROM bgw_jit_history;
SELECT count(*) FROM bgw_jit_bgwriter;
SELECT count(*) AS advice_readable FROM bgw_jit_advice;
SELECT bgw_jit_reset();
RESET ROLE;
GRANT EXECUTE ON FUNCTION bgw_jit_reset() TO regress_bgw_jit_user;
SET ROLE regress_bgw_jit_user;
SELECT bgw_jit_reset();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION bgw_jit_reset() FROM regress_bgw_jit_user;
DROP ROLE regress_bgw_jit_user;
-- Nothing is SECURITY DEFINER.
SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
   AND p.prosecdef;

-- Settings: defaults, units, and bounds rejected with the old value kept.
-- (From 17 the messages give the range with units: expected/bgw_jit_1.out.)
SELECT name, setting, unit, context, min_val, max_val
  FROM pg_settings
 WHERE name LIKE 'bgw\_jit.%'
   AND name NOT IN ('bgw_jit.inject_error', 'bgw_jit.error_log_interval',
                    'bgw_jit.slice_us', 'bgw_jit.writers_min') -- test builds
 ORDER BY name;
ALTER SYSTEM SET bgw_jit.delay = 9;
ALTER SYSTEM SET bgw_jit.delay = 10001;
ALTER SYSTEM SET bgw_jit.delay = '2min';
ALTER SYSTEM SET bgw_jit.lru_maxpages = -2;
ALTER SYSTEM SET bgw_jit.lru_maxpages = 1073741824;
ALTER SYSTEM SET bgw_jit.lru_multiplier = -0.1;
ALTER SYSTEM SET bgw_jit.lru_multiplier = 10.01;
ALTER SYSTEM SET bgw_jit.smoothing_samples = 0;
ALTER SYSTEM SET bgw_jit.smoothing_samples = 1001;
ALTER SYSTEM SET bgw_jit.scan_whole_pool_seconds = 0;
ALTER SYSTEM SET bgw_jit.scan_whole_pool_seconds = 3601;
ALTER SYSTEM SET bgw_jit.history_size = -1;
ALTER SYSTEM SET bgw_jit.enabled = 'maybe';
ALTER SYSTEM SET bgw_jit.strategy = 'clock';
ALTER SYSTEM SET bgw_jit.lru_percent = 100.5;
ALTER SYSTEM SET bgw_jit.all_percent = -1;
ALTER SYSTEM SET bgw_jit.all_maxpages = -1;
ALTER SYSTEM SET bgw_jit.flush_after = -2;
ALTER SYSTEM SET bgw_jit.flush_after = 257;
SET bgw_jit.delay = 100;
SET bgw_jit.no_such_setting = 1;
SHOW bgw_jit.delay;
-- The bounds themselves are accepted.
ALTER SYSTEM SET bgw_jit.delay = 10;
ALTER SYSTEM SET bgw_jit.delay = '10s';
ALTER SYSTEM SET bgw_jit.lru_maxpages = 1073741823;
ALTER SYSTEM SET bgw_jit.lru_multiplier = 0;
ALTER SYSTEM SET bgw_jit.lru_multiplier = 10;
ALTER SYSTEM SET bgw_jit.strategy = 'jit+all';
ALTER SYSTEM SET bgw_jit.strategy = 'lap';
ALTER SYSTEM SET bgw_jit.lru_percent = 100;
ALTER SYSTEM SET bgw_jit.all_percent = 0;
ALTER SYSTEM SET bgw_jit.flush_after = 0;
ALTER SYSTEM SET bgw_jit.flush_after = '2MB';
ALTER SYSTEM RESET ALL;
-- A reload reaches the worker: conf_load_time moves and the strategy
-- switches, and back.
ALTER SYSTEM SET bgw_jit.strategy = 'lap';
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L AND strategy = 'lap'
                                FROM bgw_jit_stats$$, :'before_reload'))
       AS worker_switched_to_lap;
ALTER SYSTEM RESET ALL;
SELECT pg_reload_conf();
SELECT pg_temp.wait_for($$strategy = 'jit' FROM bgw_jit_stats$$)
       AS worker_back_to_jit;

-- bgw_jit_advice flags settings that stop the cleaning or let the
-- built-in writer clean too (its findings on load are tested in TAP).
ALTER SYSTEM SET bgw_jit.enabled = off;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;
SELECT setting, current_value, suggested_value FROM bgw_jit_advice;
ALTER SYSTEM RESET ALL;
ALTER SYSTEM SET bgw_jit.lru_maxpages = 0;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;
SELECT setting, current_value, suggested_value FROM bgw_jit_advice;
ALTER SYSTEM RESET ALL;
ALTER SYSTEM SET bgwriter_lru_maxpages = 100;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;
SELECT setting, current_value, suggested_value FROM bgw_jit_advice;
ALTER SYSTEM RESET ALL;
SELECT clock_timestamp() AS before_reload \gset
SELECT pg_reload_conf();
SELECT pg_temp.wait_for(format($$conf_load_time >= %L FROM bgw_jit_stats$$,
                               :'before_reload')) AS reloaded;
SELECT count(*) AS findings FROM bgw_jit_advice;

--
-- The estimator, replayed with hand-computed figures.  nbuffers = 4096,
-- delay 200 ms and 120 s give min_scan_buffers = (int) (4096 / 600) = 6.
--
-- Fast attack, slow decline: jumps to 100 at once, then loses 1/16 of the
-- gap per cycle (100 - 100/16 = 93.75, 93.75 - 93.75/16 = 87.890625).
-- The density moves 1/16 of the way from 10 to 200/100 = 2.
SELECT * FROM bgw_jit_replay(ARRAY[100, 0, 0], ARRAY[200, 0, 0],
                             nbuffers => 4096);
-- Smoothing 1 is no smoothing; 320 barely moves (100 - 100/320).
SELECT cycle, smoothed_alloc, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[100, 0], ARRAY[0, 0], smoothing_samples => 1,
                      nbuffers => 4096);
SELECT cycle, smoothed_alloc, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[100, 0], ARRAY[0, 0], smoothing_samples => 320,
                      nbuffers => 4096);
-- At 10 ms, a few allocations per cycle.  Integer arithmetic would give
-- (3 - 10) / 16 = 0 and never decay (a bug once reported against core's
-- writer); floats do:
-- 10 - 7/16 = 9.5625, then 9.15234375, then 8.767822265625.
SELECT cycle, smoothed_alloc, min_scan_buffers, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[10, 3, 3, 3], ARRAY[0, 0, 0, 0], delay => 10,
                      nbuffers => 4096);
-- Idle: the floor laps the pool in scan_whole_pool_seconds, plus the
-- reusable buffers believed ahead (100 / 10 = 10).  With 1 s at 200 ms
-- the floor is 4096 / 5 = 819.
SELECT cycle, reusable_buffers_est, min_scan_buffers, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[0, 0], ARRAY[0, 0], bufs_ahead => ARRAY[0, 100],
                      nbuffers => 4096);
SELECT cycle, min_scan_buffers, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[0], ARRAY[0], scan_whole_pool_seconds => 1,
                      nbuffers => 4096);
-- Reset to 0: 0.4 decays to 0.375, and 0.375 * 2 truncates to 0.
SELECT cycle, smoothed_alloc, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[0], ARRAY[0], start_smoothed_alloc => 0.4,
                      nbuffers => 4096);
-- The scan's own density sample: 10 -> 9.6875 (from 50/10 = 5), then
-- 40 scanned per 10 reusable found: 9.6875 + (4 - 9.6875) / 16.
SELECT cycle, smoothed_density
  FROM bgw_jit_replay(ARRAY[10], ARRAY[50], scanned => ARRAY[40],
                      reusable_found => ARRAY[10], nbuffers => 4096);
-- Multiplier 0 never cleans beyond the floor.
SELECT cycle, smoothed_alloc, upcoming_alloc_est
  FROM bgw_jit_replay(ARRAY[1000], ARRAY[0], lru_multiplier => 0,
                      nbuffers => 4096);
-- Against PostgreSQL's own arithmetic: core's BgBufferSync() estimate
-- transcribed from bufmgr.c (PostgreSQL 15), in sql/core_bgbuffersync.sql
-- (which t/001 and t/011 also run over the live history).
\getenv abs_srcdir PG_ABS_SRCDIR
\set core_bgbuffersync :abs_srcdir '/sql/core_bgbuffersync.sql'
\i :core_bgbuffersync
-- 3000 pseudo-random cycles (idle ones included) under several settings:
-- every figure of every cycle must match exactly.
SELECT setseed(0.42);
CREATE TEMP TABLE cycles AS
    SELECT i,
           CASE WHEN random() < 0.2 THEN 0
                ELSE (random() * 5000)::bigint END AS recent_alloc,
           CASE WHEN random() < 0.2 THEN 0
                ELSE (random() * 20000)::bigint END AS strategy_delta,
           (random() * 4096)::bigint AS bufs_ahead,
           (random() * 4096)::bigint AS scanned,
           random() AS reusable_share
      FROM generate_series(1, 3000) i;
WITH settings (multiplier, smoothing, delay, whole) AS (
         VALUES (2.0, 16, 200, 120), (1.0, 1, 10, 120), (7.3, 320, 20, 1),
                (0.0, 16, 200, 3600), (3.0, 64, 10000, 5)),
     arrays AS (
         SELECT array_agg(recent_alloc ORDER BY i) AS a,
                array_agg(strategy_delta ORDER BY i) AS d,
                array_agg(bufs_ahead ORDER BY i) AS b,
                array_agg(scanned ORDER BY i) AS s,
                array_agg((scanned * reusable_share)::bigint ORDER BY i) AS r
           FROM cycles)
SELECT st.multiplier, st.smoothing, st.delay, st.whole,
       count(*) AS cycles,
       count(*) FILTER (WHERE (c.*)::text = (r.*)::text) AS identical
  FROM settings st, arrays,
       LATERAL pg_temp.core_bgbuffersync(a, d, b, s, r, st.multiplier,
                                         st.smoothing, st.delay, st.whole,
                                         4096) c
       JOIN LATERAL bgw_jit_replay(a, d, b, s, r, st.multiplier, st.smoothing,
                                   st.delay, st.whole, 4096) r
         ON r.cycle = c.cycle
 GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;

-- Started from a recorded state, as t/001 and t/011 replay the live
-- history: the same.
WITH arrays AS (
         SELECT array_agg(recent_alloc ORDER BY i) AS a,
                array_agg(strategy_delta ORDER BY i) AS d,
                array_agg(bufs_ahead ORDER BY i) AS b,
                array_agg(scanned ORDER BY i) AS s,
                array_agg((scanned * reusable_share)::bigint ORDER BY i) AS r
           FROM cycles)
SELECT count(*) AS cycles,
       count(*) FILTER (WHERE (c.*)::text = (r.*)::text) AS identical
  FROM arrays,
       LATERAL pg_temp.core_bgbuffersync(a, d, b, s, r, 2.0, 16, 200, 120,
                                         4096, start_smoothed_alloc => 123.5,
                                         start_smoothed_density => 3.25) c
       JOIN LATERAL bgw_jit_replay(a, d, b, s, r, 2.0, 16, 200, 120, 4096,
                                   start_smoothed_alloc => 123.5,
                                   start_smoothed_density => 3.25) r
         ON r.cycle = c.cycle;

-- Bad input: clean errors.
SELECT * FROM bgw_jit_replay(NULL, ARRAY[0]);
SELECT * FROM bgw_jit_replay(ARRAY[1, 2], ARRAY[0]);
SELECT * FROM bgw_jit_replay(ARRAY[-1], ARRAY[0]);
SELECT * FROM bgw_jit_replay(ARRAY[4294967296], ARRAY[0]);
SELECT * FROM bgw_jit_replay(ARRAY[1, NULL], ARRAY[0, 0]);
SELECT * FROM bgw_jit_replay(ARRAY[[1], [2]], ARRAY[[0], [0]]);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], scanned => ARRAY[1]);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], lru_multiplier => 11);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], smoothing_samples => 0);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], delay => NULL);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], nbuffers => -5);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], start_smoothed_density => 0);
SELECT * FROM bgw_jit_replay(ARRAY[1], ARRAY[0], bufs_ahead => ARRAY[5000],
                             nbuffers => 4096);
-- Empty and large inputs.
SELECT count(*) FROM bgw_jit_replay('{}', '{}');
SELECT count(*), max(upcoming_alloc_est)
  FROM bgw_jit_replay(array_fill(7::bigint, ARRAY[100000]),
                      array_fill(7::bigint, ARRAY[100000]),
                      nbuffers => 4096);

-- A NULL nbuffers is this server's shared_buffers (hence STABLE).
SELECT min_scan_buffers = (SELECT setting::int / 600 FROM pg_settings
                           WHERE name = 'shared_buffers')
       AS uses_shared_buffers
  FROM bgw_jit_replay(ARRAY[0], ARRAY[0]);

-- ALTER EXTENSION UPDATE: already at the default version, a no-op.
ALTER EXTENSION bgw_jit UPDATE;
ALTER EXTENSION bgw_jit UPDATE TO '1.4';
-- (there is no way back)
ALTER EXTENSION bgw_jit UPDATE TO '1.3';
ALTER EXTENSION bgw_jit UPDATE TO '0.9';

-- Upgrade paths: every older version, installed and updated to the
-- default, must end with exactly what a fresh install has.  Compared per
-- member object with its definition (function signature, volatility, C
-- symbol; view query and column types), privileges and comment, so that
-- an update script that forgets any of these fails here.  (From 17 the
-- views' row types and their array types are members too.)
CREATE FUNCTION pg_temp.bgw_jit_objects() RETURNS TABLE (obj text, def text)
LANGUAGE sql AS $$
    SELECT pg_describe_object(d.classid, d.objid, d.objsubid),
           CASE d.classid
               WHEN 'pg_proc'::regclass THEN
                   (SELECT pg_get_functiondef(p.oid) || ' ACL ' ||
                           coalesce(p.proacl::text, 'default')
                      FROM pg_proc p WHERE p.oid = d.objid)
               WHEN 'pg_class'::regclass THEN
                   (SELECT c.relkind::text || ' ' ||
                           coalesce(pg_get_viewdef(c.oid), '') || ' COLUMNS ' ||
                           (SELECT string_agg(a.attname || ' ' ||
                                              format_type(a.atttypid, a.atttypmod),
                                              ', ' ORDER BY a.attnum)
                              FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attnum > 0) ||
                           ' ACL ' || coalesce(c.relacl::text, 'default')
                      FROM pg_class c WHERE c.oid = d.objid)
               ELSE 'not compared'
           END || ' COMMENT ' ||
           coalesce(obj_description(d.objid, d.classid::regclass::text), 'none')
      FROM pg_depend d
     WHERE d.refclassid = 'pg_extension'::regclass
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
       AND d.deptype = 'e'
$$;
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.bgw_jit_objects();
SELECT obj FROM fresh ORDER BY obj;
-- No member names a column of a system catalog or view (1.3), so that
-- pg_upgrade can restore them on a server version that has dropped the
-- column: what views' rules depend on, column by column.  (1.2's do:
-- shown below.)
CREATE FUNCTION pg_temp.system_columns_used()
RETURNS TABLE (member text, system_column text)
LANGUAGE sql AS $$
    SELECT DISTINCT m.objid::regclass::text,
           d.refobjid::regclass::text || '.' || a.attname
      FROM pg_depend m
      JOIN pg_rewrite r ON r.ev_class = m.objid
      JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                      AND d.refclassid = 'pg_class'::regclass
                      AND d.refobjsubid > 0
      JOIN pg_class c ON c.oid = d.refobjid
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.refobjsubid
     WHERE m.classid = 'pg_class'::regclass
       AND m.refclassid = 'pg_extension'::regclass
       AND m.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
       AND m.deptype = 'e'
       AND c.relnamespace = 'pg_catalog'::regnamespace
$$;
SELECT * FROM pg_temp.system_columns_used() ORDER BY 1, 2;
CREATE TEMP TABLE update_check (source text, path text, side text, obj text);
DO $$
DECLARE
    upd record;
BEGIN
    FOR upd IN
        SELECT source, path FROM pg_extension_update_paths('bgw_jit')
         WHERE target = (SELECT extversion FROM default_version)
           AND path IS NOT NULL
         ORDER BY source
    LOOP
        DROP EXTENSION bgw_jit;
        EXECUTE format('CREATE EXTENSION bgw_jit VERSION %L', upd.source);
        ALTER EXTENSION bgw_jit UPDATE;
        INSERT INTO update_check
            SELECT upd.source, upd.path, 'walked', NULL
            UNION ALL
            SELECT upd.source, upd.path, 'only a fresh install has', obj
              FROM (SELECT * FROM fresh
                    EXCEPT SELECT * FROM pg_temp.bgw_jit_objects()) x
            UNION ALL
            SELECT upd.source, upd.path, 'only the updated install has', obj
              FROM (SELECT * FROM pg_temp.bgw_jit_objects()
                    EXCEPT SELECT * FROM fresh) x;
    END LOOP;
END
$$;
SELECT * FROM update_check ORDER BY source, side, obj;
-- The comparison does notice what an update script could forget: a
-- volatility, a privilege.
ALTER FUNCTION bgw_jit_replay(bigint[], bigint[], bigint[], bigint[], bigint[],
                              double precision, integer, integer, integer,
                              integer, double precision, double precision)
    IMMUTABLE;
REVOKE SELECT ON bgw_jit_history FROM PUBLIC;
SELECT obj FROM (SELECT * FROM pg_temp.bgw_jit_objects()
                 EXCEPT SELECT * FROM fresh) x ORDER BY obj;

-- The 1.0 definitions keep working with this library until updated: each
-- version's SQL calls C symbols that fill exactly its columns.
DROP EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit VERSION '1.0';
SELECT strategy, buf_clean_useful >= 0 AS useful,
       buf_clean_wasted >= 0 AS wasted, coalesce(useful_pct, 0) >= 0 AS pct
  FROM bgw_jit_stats;
SELECT count(*) > 0 AS history_v1_0,
       bool_and(useful >= 0 AND wasted >= 0) AS v1_0_columns
  FROM bgw_jit_history;
-- So do 1.1's.
DROP EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit VERSION '1.1';
SELECT strategy, buf_clean_evicted >= 0 AS evicted, pacing IS NOT NULL AS pacing,
       cpu_priority IS NOT NULL AS cpu_priority
  FROM bgw_jit_stats;
SELECT count(*) > 0 AS history_v1_1, bool_and(elapsed_us >= 0) AS v1_1_columns
  FROM bgw_jit_history;
-- And 1.2's, whose bgw_jit_bgwriter and bgw_jit_advice name columns of
-- pg_stat_bgwriter (those of the server it was created on) and
-- pg_settings: what 1.3 does away with.
DROP EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit VERSION '1.2';
SELECT strategy, buf_combined >= 0 AS combined FROM bgw_jit_stats;
SELECT count(*) > 0 AS history_v1_2, bool_and(combined >= 0) AS v1_2_columns
  FROM bgw_jit_history;
SELECT buffers_clean >= 0 AS clean, buffers_alloc >= 0 AS alloc
  FROM bgw_jit_bgwriter;
-- (it reads: an error would show here)
SELECT FROM bgw_jit_advice LIMIT 0;
SELECT * FROM pg_temp.system_columns_used() ORDER BY 1, 2;
-- A declaration of another width is refused, clearly.
CREATE FUNCTION pg_temp.stats_narrow(OUT strategy text, OUT buf_clean bigint)
    RETURNS record
    AS '$libdir/bgw_jit', 'bgw_jit_stats_1_1' LANGUAGE C;
SELECT * FROM pg_temp.stats_narrow();
CREATE FUNCTION pg_temp.history_narrow(OUT cycle bigint, OUT at timestamptz)
    RETURNS SETOF record
    AS '$libdir/bgw_jit', 'bgw_jit_history' LANGUAGE C;
SELECT * FROM pg_temp.history_narrow();

-- Dropping and re-creating the extension works.
DROP EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit;
CREATE EXTENSION IF NOT EXISTS bgw_jit;
SELECT count(*) FROM bgw_jit_stats;
DROP EXTENSION bgw_jit;
