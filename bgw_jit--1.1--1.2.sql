/* bgw_jit--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION bgw_jit UPDATE TO '1.2'" to load this file. \quit

-- 1.2 adds write combining's counters and monitoring objects.  Whatever
-- is created here must be created exactly as bgw_jit--1.2.sql creates it
-- (the regression test compares an updated install with a fresh one).

-- Write combining (bgw_jit.combine_limit): bgw_jit_stats gains
-- buf_combined and bgw_jit_history combined, the neighbours written along
-- with a page (included in the writes counted).  The views and their
-- functions are re-created as bgw_jit--1.2.sql creates them.
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
    OUT cpu_priority text,
    OUT buf_combined bigint
)
RETURNS record
AS 'MODULE_PATHNAME', 'bgw_jit_stats_1_2'
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
           buf_combined
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
    OUT woken boolean,
    OUT combined integer
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bgw_jit_history_1_2'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW bgw_jit_history AS
    SELECT * FROM bgw_jit_history();

GRANT SELECT ON bgw_jit_stats, bgw_jit_history TO PUBLIC;
-- pg_stat_bgwriter with bgw_jit's writes counted as the background
-- writer's (README, "Monitoring").  The function gives the worker's share
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

-- The view has exactly pg_stat_bgwriter's columns, which depend on the
-- server version: 15 and 16 keep the checkpointer's and the backends'
-- figures there, 17 moved them to pg_stat_checkpointer and pg_stat_io.
DO $$
BEGIN
    IF current_setting('server_version_num')::integer < 170000 THEN
        CREATE VIEW bgw_jit_bgwriter AS
            SELECT b.checkpoints_timed,
                   b.checkpoints_req,
                   b.checkpoint_write_time,
                   b.checkpoint_sync_time,
                   b.buffers_checkpoint,
                   b.buffers_clean + j.buffers_clean AS buffers_clean,
                   b.maxwritten_clean + j.maxwritten_clean AS maxwritten_clean,
                   greatest(b.buffers_backend - j.buffers_backend, 0)
                       AS buffers_backend,
                   b.buffers_backend_fsync,
                   b.buffers_alloc,
                   b.stats_reset
              FROM pg_stat_bgwriter b,
                   bgw_jit_bgwriter(b.stats_reset) j;
    ELSE
        CREATE VIEW bgw_jit_bgwriter AS
            SELECT b.buffers_clean + j.buffers_clean AS buffers_clean,
                   b.maxwritten_clean + j.maxwritten_clean AS maxwritten_clean,
                   b.buffers_alloc,
                   b.stats_reset
              FROM pg_stat_bgwriter b,
                   bgw_jit_bgwriter(b.stats_reset) j;
    END IF;
END
$$;

GRANT SELECT ON bgw_jit_bgwriter TO PUBLIC;
