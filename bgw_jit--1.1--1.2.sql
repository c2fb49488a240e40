/* bgw_jit--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION bgw_jit UPDATE TO '1.2'" to load this file. \quit

-- 1.2 adds monitoring objects; the objects of 1.1 are unchanged.  Whatever
-- is added here must be created exactly as bgw_jit--1.2.sql creates it
-- (the regression test compares an updated install with a fresh one).

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
