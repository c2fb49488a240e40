/* bgw_jit--1.4.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION bgw_jit" to load this file. \quit

CREATE FUNCTION bgw_jit_stats(
    OUT strategy text,
    OUT buf_clean bigint,
    OUT buf_all_clean bigint,
    OUT buf_backend bigint,
    OUT buf_alloc bigint,
    OUT buf_clean_evicted bigint,
    OUT buf_clean_redirtied bigint,
    OUT maxwritten_clean bigint,
    OUT cycles bigint,
    OUT laps bigint,
    OUT hibernations bigint,
    OUT buffers_scanned bigint,
    OUT buffers_reusable bigint,
    OUT strategy_buf_id integer,
    OUT next_to_clean integer,
    OUT bufs_ahead integer,
    OUT smoothed_alloc double precision,
    OUT smoothed_density double precision,
    OUT upcoming_alloc_est integer,
    OUT last_cycle_at timestamp with time zone,
    OUT stats_reset timestamp with time zone,
    OUT conf_load_time timestamp with time zone,
    OUT pacing text,
    OUT margin double precision,
    OUT hand_rate double precision,
    OUT lead_target integer,
    OUT sleep_ms integer,
    OUT buffers_overrun bigint,
    OUT cpu_priority text,
    OUT buf_combined bigint,
    OUT pid integer,
    OUT buf_backend_at timestamp with time zone,
    OUT buf_wal_deferred bigint
)
RETURNS record
AS 'MODULE_PATHNAME', 'bgw_jit_stats_1_3'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW bgw_jit_stats AS
    SELECT strategy,
           buf_clean,
           buf_all_clean,
           buf_backend,
           buf_alloc,
           round(100.0 * buf_clean / nullif(buf_clean + buf_backend, 0), 2)
               AS cleaner_pct,
           buf_clean_evicted,
           buf_clean_redirtied,
           round(100.0 * buf_clean_redirtied /
                 nullif(buf_clean_evicted + buf_clean_redirtied, 0), 2)
               AS redirtied_pct,
           maxwritten_clean,
           cycles,
           laps,
           hibernations,
           buffers_scanned,
           buffers_reusable,
           strategy_buf_id,
           next_to_clean,
           bufs_ahead,
           smoothed_alloc,
           smoothed_density,
           upcoming_alloc_est,
           last_cycle_at,
           stats_reset,
           conf_load_time,
           pacing,
           margin,
           hand_rate,
           lead_target,
           sleep_ms,
           buffers_overrun,
           cpu_priority,
           buf_combined,
           pid,
           buf_backend_at,
           buf_wal_deferred
    FROM bgw_jit_stats();

CREATE FUNCTION bgw_jit_history(
    OUT cycle bigint,
    OUT at timestamp with time zone,
    OUT strategy text,
    OUT recent_alloc bigint,
    OUT alloc_reported bigint,
    OUT strategy_delta bigint,
    OUT smoothed_alloc double precision,
    OUT smoothed_density double precision,
    OUT upcoming_alloc_est integer,
    OUT bufs_ahead integer,
    OUT scanned integer,
    OUT written integer,
    OUT all_written integer,
    OUT reusable_found integer,
    OUT evicted integer,
    OUT redirtied integer,
    OUT lapped boolean,
    OUT hit_maxpages boolean,
    OUT cpu_us bigint,
    OUT elapsed_us bigint,
    OUT overrun bigint,
    OUT surprise double precision,
    OUT margin double precision,
    OUT hand_rate double precision,
    OUT lead_target integer,
    OUT sleep_ms integer,
    OUT woken boolean,
    OUT combined integer,
    OUT sliced boolean,
    OUT restarted boolean,
    OUT misses double precision,
    OUT write_rate double precision,
    OUT backend_writes bigint,
    OUT wal_deferred integer
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_history_1_3'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW bgw_jit_history AS
    SELECT * FROM bgw_jit_history();

CREATE FUNCTION bgw_jit_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bgw_jit_reset'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- STABLE: a NULL nbuffers means this server's shared_buffers.
CREATE FUNCTION bgw_jit_replay(
    recent_allocs bigint[],
    strategy_deltas bigint[],
    bufs_ahead bigint[] DEFAULT NULL,
    scanned bigint[] DEFAULT NULL,
    reusable_found bigint[] DEFAULT NULL,
    lru_multiplier double precision DEFAULT 2.0,
    smoothing_samples integer DEFAULT 16,
    delay integer DEFAULT 200,
    scan_whole_pool_seconds integer DEFAULT 120,
    nbuffers integer DEFAULT NULL,
    start_smoothed_alloc double precision DEFAULT 0,
    start_smoothed_density double precision DEFAULT 10,
    OUT cycle integer,
    OUT smoothed_alloc double precision,
    OUT smoothed_density double precision,
    OUT reusable_buffers_est integer,
    OUT min_scan_buffers integer,
    OUT upcoming_alloc_est integer
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_replay'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL SAFE;

CREATE FUNCTION bgw_jit_replay_pacer(
    elapsed_us bigint[],
    hand_moved bigint[],
    written bigint[] DEFAULT NULL,
    evicted bigint[] DEFAULT NULL,
    redirtied bigint[] DEFAULT NULL,
    woken boolean[] DEFAULT NULL,
    lru_multiplier text DEFAULT 'auto',
    pacing text DEFAULT 'auto',
    delay integer DEFAULT 200,
    smoothing_samples integer DEFAULT 16,
    scan_whole_pool_seconds integer DEFAULT 120,
    nbuffers integer DEFAULT NULL,
    max_write_rate double precision DEFAULT 0,
    lru_maxpages integer DEFAULT -1,
    start_hand_rate double precision DEFAULT 0,
    start_margin double precision DEFAULT 1.5,
    start_planned_ms double precision DEFAULT 0,
    overrun bigint[] DEFAULT NULL,
    recent_alloc bigint[] DEFAULT NULL,
    backend_writes bigint[] DEFAULT NULL,
    restarted boolean[] DEFAULT NULL,
    sliced boolean[] DEFAULT NULL,
    start_backend_writes bigint DEFAULT NULL,
    OUT cycle integer,
    OUT hand_rate double precision,
    OUT surprise double precision,
    OUT margin double precision,
    OUT sleep_ms integer,
    OUT lead_target integer,
    OUT min_scan integer,
    OUT write_budget integer,
    OUT misses double precision,
    OUT idle_pages integer,
    OUT write_rate double precision
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_replay_pacer'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL SAFE;

-- Like pg_stat_bgwriter: statistics for everyone, reset for the few.
GRANT SELECT ON bgw_jit_stats, bgw_jit_history TO PUBLIC;
REVOKE ALL ON FUNCTION bgw_jit_reset() FROM PUBLIC;

-- pg_stat_bgwriter with bgw_jit's writes counted as the background
-- writer's (doc/monitoring.md).  The function gives the worker's share
-- of pg_stat_bgwriter's statistics period that began at 'stats_reset'.
CREATE FUNCTION bgw_jit_bgwriter(
    stats_reset timestamp with time zone,
    OUT buffers_clean bigint,
    OUT maxwritten_clean bigint,
    OUT buffers_backend bigint
)
RETURNS record
AS 'MODULE_PATHNAME', 'bgw_jit_bgwriter_1_2'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

-- The server's own pg_stat_bgwriter figures, in the same columns on every
-- version (15's): from 17 the checkpoint ones are pg_stat_checkpointer's
-- and buffers_backend, buffers_backend_fsync are NULL.  Read in C, so that
-- nothing here names a column of a system view: pg_upgrade to a version
-- that dropped one could not restore a view that did (1.2's).
CREATE FUNCTION bgw_jit_core_bgwriter(
    OUT checkpoints_timed bigint,
    OUT checkpoints_req bigint,
    OUT checkpoint_write_time double precision,
    OUT checkpoint_sync_time double precision,
    OUT buffers_checkpoint bigint,
    OUT buffers_clean bigint,
    OUT maxwritten_clean bigint,
    OUT buffers_backend bigint,
    OUT buffers_backend_fsync bigint,
    OUT buffers_alloc bigint,
    OUT stats_reset timestamp with time zone
)
RETURNS record
AS 'MODULE_PATHNAME', 'bgw_jit_core_bgwriter'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW bgw_jit_bgwriter AS
    SELECT b.checkpoints_timed,
           b.checkpoints_req,
           b.checkpoint_write_time,
           b.checkpoint_sync_time,
           b.buffers_checkpoint,
           b.buffers_clean + j.buffers_clean AS buffers_clean,
           b.maxwritten_clean + j.maxwritten_clean AS maxwritten_clean,
           CASE WHEN b.buffers_backend IS NOT NULL
                THEN greatest(b.buffers_backend - j.buffers_backend, 0)
           END AS buffers_backend,
           b.buffers_backend_fsync,
           b.buffers_alloc,
           b.stats_reset
      FROM bgw_jit_core_bgwriter() b,
           bgw_jit_bgwriter(b.stats_reset) j;

GRANT SELECT ON bgw_jit_bgwriter TO PUBLIC;

-- ---------------------------------------------------------------------------
-- bgw_jit_advice (1.2): findings on the recent history, the counters and
-- the settings.  Pure SQL over the views and functions above and
-- current_setting(): no column of a system view (1.3; see
-- bgw_jit_core_bgwriter).
-- ---------------------------------------------------------------------------

-- bgw_jit_advice: one row per finding on the last five minutes of the
-- history, the counters and the settings; no rows when nothing is wrong.
-- The findings and their thresholds are listed in doc/monitoring.md ("Advice").
CREATE VIEW bgw_jit_advice AS
WITH
-- bgw_jit_stats raises the "not preloaded" error; settings are read with
-- missing_ok so that no other error can come first.
s AS (
    SELECT buf_clean, buf_backend,
           100.0 * buf_backend / nullif(buf_clean + buf_backend, 0)
               AS backend_pct,
           stats_reset, last_cycle_at, conf_load_time,
           cpu_priority AS cpu_in_force
      FROM bgw_jit_stats
),
c AS (
    SELECT current_setting('bgw_jit.enabled', true) AS enabled,
           current_setting('bgw_jit.pacing', true) AS pacing,
           current_setting('bgw_jit.strategy', true) AS strategy,
           current_setting('bgw_jit.lru_multiplier', true) AS multiplier,
           current_setting('bgw_jit.lru_maxpages', true)::integer AS maxpages,
           current_setting('bgw_jit.max_write_rate', true)::float8 AS max_rate,
           current_setting('bgw_jit.cpu_priority', true) AS cpu_priority,
           (extract(epoch FROM current_setting('bgw_jit.delay', true)::interval)
            * 1000)::integer AS delay_ms,
           current_setting('bgwriter_lru_maxpages')::integer AS core_maxpages,
           pg_size_bytes(current_setting('shared_buffers')) /
               current_setting('block_size')::integer AS nbuffers,
           current_setting('block_size')::integer AS block_size
),
-- The window: the cycles of the last five minutes; "busy" cycles are those
-- in which the clock hand moved.
w AS (
    SELECT count(*) FILTER (WHERE h.strategy_delta > 0) AS busy,
           coalesce(sum(h.strategy_delta), 0) AS moved,
           coalesce(sum(h.written + h.all_written), 0) AS written,
           coalesce(sum(h.all_written), 0) AS all_written,
           coalesce(sum(h.overrun), 0) AS overrun,
           coalesce(sum(h.elapsed_us), 0) / 1e6 AS seconds,
           count(*) FILTER (WHERE h.strategy_delta > 0 AND h.lapped) AS lapped,
           count(*) FILTER (WHERE h.strategy_delta > 0 AND h.hit_maxpages)
               AS hit,
           count(*) FILTER (WHERE h.strategy_delta > 0 AND h.hit_maxpages
                              AND c.maxpages > 0 AND h.written >= c.maxpages)
               AS hit_cap,
           count(*) FILTER (WHERE h.strategy_delta > 0 AND h.hit_maxpages
                              AND NOT (c.maxpages > 0 AND h.written >= c.maxpages))
               AS hit_rate,
           -- (a cycle still going on in its time slices shows sleep_ms 1)
           count(*) FILTER (WHERE h.strategy_delta > 0 AND h.sleep_ms <= 10
                              AND NOT (h.sliced AND h.sleep_ms = 1))
               AS min_sleep,
           coalesce(sum(h.evicted), 0) AS evicted,
           coalesce(sum(h.redirtied), 0) AS redirtied,
           avg(h.margin) FILTER (WHERE h.strategy_delta > 0) AS margin,
           avg(h.hand_rate) FILTER (WHERE h.strategy_delta > 0) AS hand_rate,
           avg(h.bufs_ahead) FILTER (WHERE h.strategy_delta > 0) AS ahead,
           avg(h.strategy_delta) FILTER (WHERE h.strategy_delta > 0) AS per_cycle
      FROM c, bgw_jit_history h
     WHERE h.at >= now() - interval '5 minutes'
),
-- The automatic margin is pinned when it stayed within 5% of its upper
-- bound (10) over each of the last 20 busy cycles.
pin AS (
    SELECT count(*) = 20 AND min(l.margin) >= 9.5 AS margin_pinned
      FROM (SELECT h.margin FROM bgw_jit_history h
             WHERE h.at >= now() - interval '5 minutes' AND h.strategy_delta > 0
             ORDER BY h.cycle DESC LIMIT 20) l
),
-- Figures the findings share.
f AS (
    SELECT s.*, c.*, w.*, pin.margin_pinned,
           100.0 * w.overrun / nullif(w.moved, 0) AS overrun_pct,
           100.0 * w.lapped / nullif(w.busy, 0) AS lapped_pct,
           100.0 * w.hit / nullif(w.busy, 0) AS hit_pct,
           100.0 * w.redirtied / nullif(w.evicted + w.redirtied, 0)
               AS redirtied_window_pct,
           -- backends wrote a large share while the hand outran the cleaner
           (w.busy >= 20 AND w.moved >= 1000
            AND s.buf_clean + s.buf_backend >= 1000
            AND coalesce(100.0 * s.buf_backend /
                         nullif(s.buf_clean + s.buf_backend, 0), 0) >= 10
            AND coalesce(100.0 * w.overrun / nullif(w.moved, 0), 0) >= 10)
               AS pressure,
           c.enabled = 'on' AND c.maxpages <> 0 AS cleaning
      FROM s, c, w, pin
),
-- The evidence every finding about backend writes starts from.
e AS (
    SELECT f.*,
           format('backends wrote %s%% of the %s pages written since stats_reset (%s); '
                  'in the last %s s the clock hand ran past the cleaner in %s%% of %s busy cycles, '
                  '%s of the %s buffers it passed (%s%%)',
                  round(f.backend_pct, 1), f.buf_clean + f.buf_backend,
                  to_char(f.stats_reset, 'YYYY-MM-DD HH24:MI:SS'),
                  round(f.seconds), round(f.lapped_pct), f.busy,
                  f.overrun, f.moved, round(f.overrun_pct, 1)) AS pressure_evidence
      FROM f
),
findings AS (
    -- the worker is not running (or stuck)
    SELECT 1 AS rank, 'warning' AS severity, NULL::text AS setting,
           NULL::text AS current_value, NULL::text AS suggested_value,
           'the bgw_jit worker is not running: nothing cleans' AS finding,
           CASE WHEN e.last_cycle_at IS NULL
                THEN 'no cycle since the server started at ' ||
                     to_char(pg_postmaster_start_time(), 'YYYY-MM-DD HH24:MI:SS')
                ELSE format('last cycle %s s ago, at %s',
                            round(extract(epoch FROM clock_timestamp() - e.last_cycle_at)),
                            to_char(e.last_cycle_at, 'YYYY-MM-DD HH24:MI:SS'))
           END AS evidence
      FROM e
     WHERE (e.last_cycle_at IS NULL AND
            clock_timestamp() - pg_postmaster_start_time() > interval '60 s')
        OR clock_timestamp() - e.last_cycle_at >
           3 * greatest(e.delay_ms, 1000) * interval '1 ms' + interval '10 s'
    UNION ALL
    SELECT 2, CASE WHEN e.buf_backend >= 1000 THEN 'warning' ELSE 'notice' END,
           'bgw_jit.enabled', e.enabled, 'on',
           'bgw_jit is disabled: the worker writes nothing and backends write every dirty buffer they evict',
           format('backends wrote %s pages since stats_reset (%s)', e.buf_backend,
                  to_char(e.stats_reset, 'YYYY-MM-DD HH24:MI:SS'))
      FROM e WHERE e.enabled = 'off'
    UNION ALL
    SELECT 2, CASE WHEN e.buf_backend >= 1000 THEN 'warning' ELSE 'notice' END,
           'bgw_jit.lru_maxpages', e.maxpages::text, '-1',
           'lru_maxpages = 0 stops the cleaning scan: backends write every dirty buffer they evict',
           format('backends wrote %s pages since stats_reset (%s)', e.buf_backend,
                  to_char(e.stats_reset, 'YYYY-MM-DD HH24:MI:SS'))
      FROM e WHERE e.enabled = 'on' AND e.maxpages = 0
    UNION ALL
    -- both cleaners at once
    SELECT 3, CASE WHEN b.buffers_clean > 0 THEN 'warning' ELSE 'notice' END,
           'bgwriter_lru_maxpages', e.core_maxpages::text, '0',
           'the built-in background writer cleans the same buffers as bgw_jit',
           format('pg_stat_bgwriter.buffers_clean = %s since %s; bgw_jit wrote %s since %s',
                  b.buffers_clean, to_char(b.stats_reset, 'YYYY-MM-DD HH24:MI:SS'),
                  e.buf_clean, to_char(e.stats_reset, 'YYYY-MM-DD HH24:MI:SS'))
      FROM e, bgw_jit_core_bgwriter() b
     WHERE e.cleaning AND e.core_maxpages > 0
    UNION ALL
    -- the per-cycle page cap
    SELECT 4, 'warning', 'bgw_jit.lru_maxpages', e.maxpages::text, '-1',
           'the per-cycle page cap stops the cleaner while backends write; -1 sets no cap (use max_write_rate to protect a slow disk)',
           format('the cap of %s pages stopped %s%% of the last %s busy cycles; %s',
                  e.maxpages, round(100.0 * e.hit_cap / nullif(e.busy, 0)), e.busy,
                  e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.maxpages > 0
       AND 100.0 * e.hit_cap / nullif(e.busy, 0) >= 20
    UNION ALL
    -- the rate budget
    SELECT 4, 'warning', 'bgw_jit.max_write_rate', e.max_rate::text,
           greatest(ceil(e.max_rate * 2),
                    ceil(1.5 * (e.written + e.overrun) * e.block_size /
                         1048576.0 / nullif(e.seconds, 0)))::text,
           'the write rate budget stops the cleaner while backends write; 0 sets no limit',
           format('the budget of %s MB/s stopped %s%% of the last %s busy cycles; '
                  'the cleaner wrote %s MB/s and the hand passed another %s MB/s uncleaned; %s',
                  e.max_rate, round(100.0 * e.hit_rate / nullif(e.busy, 0)), e.busy,
                  round((e.written * e.block_size / 1048576.0 / nullif(e.seconds, 0))::numeric, 1),
                  round((e.overrun * e.block_size / 1048576.0 / nullif(e.seconds, 0))::numeric, 1),
                  e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.max_rate > 0
       AND 100.0 * e.hit_rate / nullif(e.busy, 0) >= 20
    UNION ALL
    -- fixed pacing too slow for the load
    SELECT 5, 'warning', 'bgw_jit.pacing', e.pacing, 'auto',
           format('a cycle every %s ms with multiplier %s does not keep ahead of the clock hand; auto pacing sleeps as the hand''s speed allows',
                  e.delay_ms, e.multiplier),
           format('lead over the hand %s buffers on average against %s buffers passed per cycle; %s',
                  round(e.ahead), round(e.per_cycle), e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.pacing = 'fixed' AND e.strategy = 'jit'
       AND e.hit_pct < 20
    UNION ALL
    -- a fixed multiplier too small
    SELECT 5, 'warning', 'bgw_jit.lru_multiplier', e.multiplier, 'auto',
           'the fixed multiplier leaves too little lead over the clock hand; auto raises it while backends still meet dirty buffers',
           format('lead over the hand %s buffers on average against %s buffers passed per cycle; %s',
                  round(e.ahead), round(e.per_cycle), e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.multiplier <> 'auto'
       AND e.strategy = 'jit' AND e.hit_pct < 20
    UNION ALL
    -- lap and jit+all pace fixed, whatever the load
    SELECT 5, 'warning', 'bgw_jit.strategy', e.strategy, 'jit',
           format('the %s strategy scans at a fixed pace and does not keep ahead of the clock hand', e.strategy),
           e.pressure_evidence
      FROM e
     WHERE e.cleaning AND e.pressure AND e.strategy <> 'jit' AND e.hit_pct < 20
    UNION ALL
    -- auto pacing at its shortest sleep: the pool turns over too fast
    SELECT 6, 'warning', 'shared_buffers', current_setting('shared_buffers'),
           ceil(greatest(2 * e.nbuffers,
                         e.margin * e.hand_rate * 0.020 / 0.75)
                * e.block_size / 1048576.0)::bigint || 'MB',
           'auto pacing is pinned at its 10 ms minimum sleep: the clock hand passes the pool faster than the worker can wake; a larger pool gives it more lead',
           format('sleep at 10 ms in %s%% of the last %s busy cycles, the hand at %s buffers/s against a pool of %s buffers (margin %s); %s',
                  round(100.0 * e.min_sleep / nullif(e.busy, 0)), e.busy, round(e.hand_rate),
                  e.nbuffers, round(e.margin::numeric, 2), e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.pacing = 'auto' AND e.strategy = 'jit'
       AND e.delay_ms > 10 AND e.hit_pct < 20
       AND 100.0 * e.min_sleep / nullif(e.busy, 0) >= 50
       -- (a starved worker's margin, not the pool, pins the sleep then)
       AND e.cpu_in_force = 'normal' AND NOT e.margin_pinned
    UNION ALL
    -- the automatic margin at its upper bound
    SELECT 6, 'warning', 'bgw_jit.lru_multiplier', e.multiplier, NULL,
           'the automatic margin is pinned at its upper bound of 10: the worker wakes far later than it plans (short of CPU?), and no setting of bgw_jit leads further',
           format('margin 9.5 or more in each of the last 20 busy cycles, %s on average over the last %s busy cycles (CPU priority in force: %s); %s',
                  round(e.margin::numeric, 2), e.busy, e.cpu_in_force,
                  e.pressure_evidence)
      FROM e
     WHERE e.cleaning AND e.pressure AND e.multiplier = 'auto' AND e.hit_pct < 20
       AND e.margin_pinned
    UNION ALL
    -- a low CPU priority starves the worker
    SELECT 7, 'warning', 'bgw_jit.cpu_priority', e.cpu_in_force, 'normal',
           'the worker runs at a low CPU priority and falls behind the clock hand',
           e.pressure_evidence
      FROM e
     WHERE e.cleaning AND e.pressure AND e.cpu_in_force <> 'normal'
       AND e.hit_pct < 20
    UNION ALL
    -- a CPU priority the worker could not take
    SELECT 8, 'notice', 'bgw_jit.cpu_priority', e.cpu_in_force, e.cpu_priority,
           'the worker could not raise its CPU priority (that needs CAP_SYS_NICE): it takes the configured one at the next server restart',
           format('configured %s, in force %s (bgw_jit_stats.cpu_priority), settings loaded by the worker at %s',
                  e.cpu_priority, e.cpu_in_force,
                  to_char(e.conf_load_time, 'YYYY-MM-DD HH24:MI:SS'))
      FROM e
     WHERE e.cpu_in_force <> e.cpu_priority
       AND e.conf_load_time > pg_conf_load_time() - interval '1 s'
    UNION ALL
    -- wasted writes
    SELECT 9, 'notice',
           CASE WHEN e.strategy <> 'jit' THEN 'bgw_jit.strategy'
                WHEN e.multiplier <> 'auto' THEN 'bgw_jit.lru_multiplier'
                ELSE 'bgw_jit.max_write_rate' END,
           CASE WHEN e.strategy <> 'jit' THEN e.strategy
                WHEN e.multiplier <> 'auto' THEN e.multiplier
                ELSE e.max_rate::text END,
           CASE WHEN e.strategy <> 'jit' THEN 'jit'
                WHEN e.multiplier <> 'auto'
                    THEN greatest(1, round(e.multiplier::numeric / 2, 1))::text
                ELSE greatest(1, ceil(0.75 * e.written * e.block_size / 1048576.0
                                      / nullif(e.seconds, 0)))::text END,
           'many of the cleaner''s writes are wasted: their pages are dirtied again before eviction',
           format('%s%% of the %s writes judged in the last %s s were re-dirtied (%s evicted, %s re-dirtied); the cleaner wrote %s MB/s',
                  round(e.redirtied_window_pct, 1), e.evicted + e.redirtied,
                  round(e.seconds), e.evicted, e.redirtied,
                  round((e.written * e.block_size / 1048576.0 / nullif(e.seconds, 0))::numeric, 1))
      FROM e
     WHERE e.cleaning AND e.evicted + e.redirtied >= 200
       AND e.redirtied_window_pct >= 10
       AND NOT (e.strategy = 'jit+all' AND e.all_written > 0)
    UNION ALL
    -- the all-buffers scan: measured (bench/checkpoints, doc/performance.md)
    -- to add writes without flattening checkpoints that core spreads
    SELECT 9, 'notice', 'bgw_jit.strategy', e.strategy, 'jit',
           'the all-buffers scan of jit+all adds writes and does not flatten checkpoints that are spread (checkpoint_completion_target); jit cleans what backends evict',
           format('the all-buffers scan wrote %s of the %s pages the worker wrote in the last %s s%s; checkpoint_completion_target = %s',
                  e.all_written, e.written, round(e.seconds),
                  CASE WHEN e.evicted + e.redirtied > 0
                       THEN format(', and %s%% of the %s writes judged were dirtied again before eviction',
                                   round(e.redirtied_window_pct, 1), e.evicted + e.redirtied)
                       ELSE '' END,
                  current_setting('checkpoint_completion_target'))
      FROM e
     WHERE e.enabled = 'on' AND e.strategy = 'jit+all' AND e.all_written > 0
)
SELECT severity, setting, current_value, suggested_value, finding, evidence
  FROM findings
 ORDER BY severity = 'notice', rank, setting;

GRANT SELECT ON bgw_jit_advice TO PUBLIC;
