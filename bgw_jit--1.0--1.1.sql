/* bgw_jit--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION bgw_jit UPDATE TO '1.1'" to load this file. \quit

-- The views and their functions change shape: re-create them.  With the
-- later update scripts this must end with exactly what the current full
-- script creates (the regression test compares the two).
-- Columns buf_clean_useful/buf_clean_wasted/useful_pct become
-- buf_clean_evicted/buf_clean_redirtied/redirtied_pct (and useful/wasted
-- evicted/redirtied in the history), which says what the worker can tell;
-- bgw_jit_stats gains conf_load_time and the pacing state (pacing, margin,
-- hand_rate, lead_target, sleep_ms, buffers_overrun, cpu_priority), the
-- history the pacing decisions (elapsed_us .. woken); bgw_jit_replay_pacer
-- is new.
DROP VIEW bgw_jit_stats;
DROP FUNCTION bgw_jit_stats();

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
    OUT cpu_priority text
)
RETURNS record
AS 'MODULE_PATHNAME', 'bgw_jit_stats_1_1'
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
           cpu_priority
    FROM bgw_jit_stats();

DROP VIEW bgw_jit_history;
DROP FUNCTION bgw_jit_history();

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
    OUT woken boolean
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_history_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW bgw_jit_history AS
    SELECT * FROM bgw_jit_history();

GRANT SELECT ON bgw_jit_stats, bgw_jit_history TO PUBLIC;

-- 1.0 declared it IMMUTABLE, but a NULL nbuffers reads shared_buffers.
ALTER FUNCTION bgw_jit_replay(bigint[], bigint[], bigint[], bigint[], bigint[],
                              double precision, integer, integer, integer,
                              integer, double precision, double precision)
    STABLE;

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
    OUT cycle integer,
    OUT hand_rate double precision,
    OUT surprise double precision,
    OUT margin double precision,
    OUT sleep_ms integer,
    OUT lead_target integer,
    OUT min_scan integer,
    OUT write_budget integer
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_replay_pacer'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL SAFE;
