-- Core's BgBufferSync() estimate transcribed from bufmgr.c (PostgreSQL
-- 15), in real (C float) variables as core declares them, with C's
-- truncating casts.  Not our code: it catches a porting error in the
-- estimator that the worker and bgw_jit_replay() would share.
-- (Not a regression test of its own: sql/bgw_jit.sql includes it with
-- \i, and t/BgwJitTest.pm's replay_core_estimator() runs it over the
-- live history; pg_temp, so each session creates its own.)
-- Optional, beyond core: the state to start from (core's is 0 and 10),
-- as recorded by the cycle before the first one given; and a multiplier
-- per cycle, for the automatic margin (as if bgwriter_lru_multiplier
-- were changed before every cycle).
CREATE FUNCTION pg_temp.core_bgbuffersync(
    recent_alloc bigint[], strategy_delta bigint[], bufs_ahead bigint[],
    scanned bigint[], reusable_found bigint[], multiplier float8,
    smoothing_samples int, delay int, scan_whole_pool_seconds int,
    nbuffers int, start_smoothed_alloc float8 DEFAULT 0,
    start_smoothed_density float8 DEFAULT 10.0,
    multipliers float8[] DEFAULT NULL)
RETURNS TABLE (cycle int, smoothed_alloc float8, smoothed_density float8,
               reusable_buffers_est int, min_scan_buffers int,
               upcoming_alloc_est int)
LANGUAGE plpgsql AS $$
DECLARE
    s_alloc real := start_smoothed_alloc;
    s_density real := start_smoothed_density;
    scans_per_alloc real;
    reusable_est int;
    upcoming int;
    min_scan int;
    scan_whole_pool_milliseconds real := scan_whole_pool_seconds * 1000;
BEGIN
    FOR i IN 1 .. coalesce(array_length(recent_alloc, 1), 0) LOOP
        IF strategy_delta[i] > 0 AND recent_alloc[i] > 0 THEN
            scans_per_alloc := strategy_delta[i]::real / recent_alloc[i]::real;
            s_density := s_density +
                (scans_per_alloc - s_density) / smoothing_samples::real;
        END IF;
        reusable_est := trunc(bufs_ahead[i]::real / s_density);
        IF s_alloc <= recent_alloc[i]::real THEN
            s_alloc := recent_alloc[i]::real;
        ELSE
            s_alloc := s_alloc +
                (recent_alloc[i]::real - s_alloc) / smoothing_samples::real;
        END IF;
        upcoming := trunc(s_alloc::float8 *
                          coalesce(multipliers[i], multiplier));
        IF upcoming = 0 THEN
            s_alloc := 0;
        END IF;
        min_scan := trunc(nbuffers::real /
                          (scan_whole_pool_milliseconds / delay::real));
        IF upcoming < min_scan + reusable_est THEN
            upcoming := min_scan + reusable_est;
        END IF;
        -- after the scan: its own density sample
        IF scanned[i] > 0 AND reusable_found[i] > 0 THEN
            scans_per_alloc := scanned[i]::real / reusable_found[i]::real;
            s_density := s_density +
                (scans_per_alloc - s_density) / smoothing_samples::real;
        END IF;
        RETURN QUERY SELECT i, s_alloc::float8, s_density::float8,
                            reusable_est, min_scan, upcoming;
    END LOOP;
END
$$;
