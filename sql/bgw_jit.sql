--
-- bgw_jit: the SQL surface (run with the library preloaded)
--
CREATE EXTENSION bgw_jit;

-- Columns and types of the views.
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_stats'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'bgw_jit_history'::regclass AND attnum > 0
 ORDER BY attnum;

-- One row; the worker is running and publishing.
SELECT count(*) FROM bgw_jit_stats;
SELECT backend_type FROM pg_stat_activity WHERE backend_type = 'bgw_jit';

-- Reset zeroes the history and moves stats_reset forward.
SELECT now() AS before_reset \gset
SELECT bgw_jit_reset();
SELECT stats_reset >= :'before_reset' AS reset_moved,
       buf_alloc < 1000 AS counters_restarted
  FROM bgw_jit_stats;
SELECT count(*) <= (SELECT cycles FROM bgw_jit_stats) AS history_within_cycles
  FROM bgw_jit_history;

-- Privileges: statistics for everyone, reset only when granted.
CREATE ROLE regress_bgw_jit_user;
SET ROLE regress_bgw_jit_user;
SELECT count(*) FROM bgw_jit_stats;
SELECT count(*) >= 0 AS readable FROM bgw_jit_history;
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
 WHERE name LIKE 'bgw\_jit.%' AND name <> 'bgw_jit.inject_error' -- test builds
 ORDER BY name;
ALTER SYSTEM SET bgw_jit.delay = 9;
ALTER SYSTEM SET bgw_jit.delay = 10001;
ALTER SYSTEM SET bgw_jit.delay = '2min';
ALTER SYSTEM SET bgw_jit.lru_maxpages = -1;
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
SELECT strategy FROM bgw_jit_stats;

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
-- Seed 000's case: at 10 ms a few allocations per cycle.  Integer
-- arithmetic would give (3 - 10) / 16 = 0 and never decay; floats do:
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

-- ALTER EXTENSION UPDATE with nothing newer is a no-op.
ALTER EXTENSION bgw_jit UPDATE;
ALTER EXTENSION bgw_jit UPDATE TO '1.0';
ALTER EXTENSION bgw_jit UPDATE TO '0.9';

-- Upgrade paths: every older version updated to the default must end with
-- exactly the objects of a fresh install.  (Only 1.0 exists so far: this
-- is the harness the next version's update script will be checked by.)
-- From 17 the views' row types and their array types are members too.
CREATE TEMP TABLE fresh_objects AS
    SELECT pg_describe_object(classid, objid, objsubid) AS obj
      FROM pg_depend
     WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
       AND deptype = 'e';
SELECT count(*) AS objects FROM fresh_objects;
DO $$
DECLARE
    upd record;
    n int := 0;
BEGIN
    FOR upd IN
        SELECT source FROM pg_extension_update_paths('bgw_jit')
         WHERE target = (SELECT default_version FROM pg_available_extensions
                          WHERE name = 'bgw_jit')
           AND path IS NOT NULL
    LOOP
        DROP EXTENSION bgw_jit;
        EXECUTE format('CREATE EXTENSION bgw_jit VERSION %L', upd.source);
        ALTER EXTENSION bgw_jit UPDATE;
        IF EXISTS (
            (SELECT obj FROM fresh_objects
             EXCEPT
             SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
              WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
                AND deptype = 'e')
            UNION ALL
            (SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
              WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
                AND deptype = 'e'
             EXCEPT
             SELECT obj FROM fresh_objects))
        THEN
            RAISE EXCEPTION 'update from % does not match a fresh install', upd.source;
        END IF;
        n := n + 1;
    END LOOP;
    RAISE NOTICE 'upgrade paths checked: %', n;
END
$$;

-- Dropping and re-creating the extension works.
DROP EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit;
CREATE EXTENSION bgw_jit;
CREATE EXTENSION IF NOT EXISTS bgw_jit;
SELECT count(*) FROM bgw_jit_stats;
DROP EXTENSION bgw_jit;
