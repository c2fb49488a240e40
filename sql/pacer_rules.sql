--
-- The controller's budget and miss rules, transcribed here from
-- their documentation (doc/internals.md, "Pacing"; pacer.h) and compared
-- with bgw_jit_replay_pacer() on made-up inputs.  The TAP tests replay the
-- live history through the worker's own code, which shows that the
-- history records the controller's inputs, not that its rules are right:
-- a wrong rule there replays exactly.  This catches one.
--
CREATE EXTENSION IF NOT EXISTS bgw_jit;

-- The budget: a token bucket holding one second at
--   rate = max(2 * margin * allocation rate,
--              nbuffers / scan_whole_pool_seconds, 1000 pages/s),
-- within max_write_rate (MB/s, 128 pages each) when set; it starts full
-- at the floor (the same max of the lap and 1000/s, within max_write_rate);
-- each cycle it gains rate * elapsed before it plans, the cycle may write
-- what it holds (whole pages, within lru_maxpages; none while it is in
-- debt) and is charged what it wrote.
-- Transcribed for a fixed margin and a steady allocation rate whose first
-- interval is at least the 50 ms attack (so the smoothed rate is the
-- observed one from the first cycle on).
CREATE FUNCTION pg_temp.budget_rule(
    elapsed_us bigint[], alloc bigint[], written bigint[], margin float8,
    nbuffers int, scan_whole_pool_seconds int DEFAULT 120,
    max_write_rate float8 DEFAULT 0, lru_maxpages int DEFAULT -1)
RETURNS TABLE (cycle int, write_rate float8, write_budget int)
LANGUAGE plpgsql AS $$
DECLARE
    floor_rate float8 := greatest(nbuffers::float8 / scan_whole_pool_seconds,
                                  1000);
    cap float8 := CASE WHEN max_write_rate > 0 THEN max_write_rate * 128 END;
    tokens float8 := least(floor_rate, cap);
    rate float8;
BEGIN
    FOR i IN 1 .. array_length(elapsed_us, 1) LOOP
        rate := least(greatest(2 * margin * alloc[i] * 1e6 / elapsed_us[i],
                               floor_rate), cap);
        tokens := least(tokens + rate * elapsed_us[i] / 1e6, rate);
        RETURN QUERY SELECT i, rate,
            CASE WHEN lru_maxpages >= 0
                 THEN least(greatest(trunc(tokens), 0)::int, lru_maxpages)
                 ELSE greatest(trunc(tokens), 0)::int END;
        tokens := tokens - coalesce(written[i], 0);
    END LOOP;
END
$$;

-- 1000 allocations in each 100 ms with margin 2: 2 * 2 * 10000 = 40000
-- pages/s, 4000 a cycle, a bucket of 40000; it starts with the floor's
-- 1000 (120000 buffers / 120 s = 1000/s).  Writes of 3000, then 50000
-- (more than it held: the bucket goes 40000 into debt, which the next ten
-- cycles' 4000 each pay off, writing nothing), then none.
SELECT r.cycle, r.write_rate, r.write_budget,
       t.write_rate AS rule_rate, t.write_budget AS rule_budget
  FROM bgw_jit_replay_pacer(array_fill(100000::bigint, ARRAY[14]),
                            array_fill(20000::bigint, ARRAY[14]),
                            ARRAY[3000, 0, 50000] || array_fill(0::bigint, ARRAY[11]),
                            recent_alloc => array_fill(1000::bigint, ARRAY[14]),
                            lru_multiplier => '2', nbuffers => 120000) r
  FULL JOIN pg_temp.budget_rule(array_fill(100000::bigint, ARRAY[14]),
                                array_fill(1000::bigint, ARRAY[14]),
                                ARRAY[3000, 0, 50000] || array_fill(0::bigint, ARRAY[11]),
                                2, nbuffers => 120000) t USING (cycle)
 ORDER BY cycle;
-- Across settings: the floors (lap, 1000/s), max_write_rate, lru_maxpages,
-- margins, allocation rates and writes; every cycle agrees with the rule.
WITH c(margin, alloc, nbuffers, swps, mwr, maxpages, el, wr) AS (
    VALUES (1.0, 10, 16384, 120, 0, -1, 200000, 100),
           (1.0, 10, 1000000, 30, 0, -1, 50000, 40000),
           (3.5, 7000, 16384, 120, 0, -1, 70000, 500),
           (2.0, 5000, 16384, 120, 8, -1, 250000, 300),
           (2.0, 5000, 16384, 120, 8, 100, 250000, 0),
           (10.0, 20000, 1000000, 120, 100000, 2000, 50000, 2500),
           (1.2, 300, 50000, 5, 0, 0, 150000, 0))
SELECT count(*) AS cycles,
       count(*) FILTER (WHERE r.write_budget IS DISTINCT FROM t.write_budget
                          OR abs(r.write_rate - t.write_rate) > 1e-9 * t.write_rate)
         AS differ
  FROM c,
       LATERAL (SELECT * FROM bgw_jit_replay_pacer(
                  array_fill(c.el::bigint, ARRAY[8]),
                  array_fill((c.alloc * 10)::bigint, ARRAY[8]),
                  array_fill(c.wr::bigint, ARRAY[8]),
                  recent_alloc => array_fill(c.alloc::bigint, ARRAY[8]),
                  lru_multiplier => c.margin::text, nbuffers => c.nbuffers,
                  scan_whole_pool_seconds => c.swps, max_write_rate => c.mwr,
                  lru_maxpages => c.maxpages)) r
       FULL JOIN LATERAL pg_temp.budget_rule(
                  array_fill(c.el::bigint, ARRAY[8]),
                  array_fill(c.alloc::bigint, ARRAY[8]),
                  array_fill(c.wr::bigint, ARRAY[8]), c.margin, c.nbuffers,
                  c.swps, c.mwr, c.maxpages) t USING (cycle);

-- The misses: how far the hand ran past the cleaned frontier over how far
-- it moved (at most 1; a movement under 32 buffers says nothing).  Where
-- the backends' writes of dirty victims are counted (16+), their increase
-- over the allocations since they last changed, taken when they change,
-- but only if the hand also ran past the frontier in that stretch; the
-- larger of the two.  Above 0.1% the automatic margin rises at once by
-- 0.25 * min(1, misses / 1%), within 1-10.  Transcribed for cycles that
-- each woke early (woken: no surprise is judged) and judged no writes, so
-- that the misses alone move the margin.
CREATE FUNCTION pg_temp.miss_rule(
    hand_moved bigint[], overrun bigint[], alloc bigint[],
    backend_writes bigint[], start_backend_writes bigint,
    start_margin float8 DEFAULT 1.5)
RETURNS TABLE (cycle int, misses float8, margin float8)
LANGUAGE plpgsql AS $$
DECLARE
    m float8;
    mg float8 := start_margin;
    seen bigint := start_backend_writes;
    stretch_alloc float8 := 0;
    stretch_overrun float8 := 0;
BEGIN
    FOR i IN 1 .. array_length(hand_moved, 1) LOOP
        m := CASE WHEN hand_moved[i] >= 32 AND overrun[i] > 0
                  THEN least(1, overrun[i]::float8 / hand_moved[i]) ELSE 0 END;
        IF backend_writes IS NOT NULL THEN
            stretch_alloc := stretch_alloc + alloc[i];
            stretch_overrun := stretch_overrun + greatest(overrun[i], 0);
            IF backend_writes[i] <> seen THEN
                IF backend_writes[i] > seen AND stretch_overrun > 0
                   AND stretch_alloc > 0 THEN
                    m := greatest(m, least(1, (backend_writes[i] - seen) /
                                              stretch_alloc));
                END IF;
                stretch_alloc := 0;
                stretch_overrun := 0;
            END IF;
            seen := backend_writes[i];
        END IF;
        IF m > 0.001 THEN
            mg := least(greatest(mg + 0.25 * least(1, m / 0.01), 1), 10);
        END IF;
        RETURN QUERY SELECT i, m, mg;
    END LOOP;
END
$$;

-- 15 (no backend count): overruns of 0, 5%, 0.5%, 0.05%, 100% (more than
-- the movement), and 1 of 20 (a movement under 32): +0.25, +0.125, 0,
-- +0.25, 0.
SELECT r.cycle, round(r.misses::numeric, 4) AS misses,
       round(r.margin::numeric, 4) AS margin,
       round(t.misses::numeric, 4) AS rule_misses,
       round(t.margin::numeric, 4) AS rule_margin
  FROM bgw_jit_replay_pacer(ARRAY[100000, 100000, 100000, 100000, 100000, 100000],
                            ARRAY[2000, 2000, 2000, 2000, 2000, 20],
                            woken => array_fill(true, ARRAY[6]),
                            overrun => ARRAY[0, 100, 10, 1, 5000, 1],
                            nbuffers => 1000000) r
  FULL JOIN pg_temp.miss_rule(ARRAY[2000, 2000, 2000, 2000, 2000, 20],
                              ARRAY[0, 100, 10, 1, 5000, 1],
                              NULL, NULL, NULL) t USING (cycle)
 ORDER BY cycle;
-- 16+: the backends' writes move in steps; a step counts over the
-- allocations since the last one, only with an overrun in that stretch.
-- 40 with no overrun: nothing; 40 over 4 cycles of 1000 with an overrun
-- of 5 (0.25%) in the middle: 1%; a step down (a reset): nothing; 30
-- over the 2000 allocations since (1.5%), with an overrun of 100 of 2000
-- (5%): 5%, the larger.
SELECT r.cycle, round(r.misses::numeric, 4) AS misses,
       round(r.margin::numeric, 4) AS margin,
       round(t.misses::numeric, 4) AS rule_misses,
       round(t.margin::numeric, 4) AS rule_margin
  FROM bgw_jit_replay_pacer(array_fill(100000::bigint, ARRAY[9]),
                            array_fill(2000::bigint, ARRAY[9]),
                            woken => array_fill(true, ARRAY[9]),
                            overrun => ARRAY[0, 0, 0, 0, 5, 0, 0, 0, 100],
                            recent_alloc => array_fill(1000::bigint, ARRAY[9]),
                            backend_writes => ARRAY[0, 40, 40, 40, 40, 80, 10, 10, 40],
                            start_backend_writes => 0, nbuffers => 1000000) r
  FULL JOIN pg_temp.miss_rule(array_fill(2000::bigint, ARRAY[9]),
                              ARRAY[0, 0, 0, 0, 5, 0, 0, 0, 100],
                              array_fill(1000::bigint, ARRAY[9]),
                              ARRAY[0, 40, 40, 40, 40, 80, 10, 10, 40], 0) t
       USING (cycle)
 ORDER BY cycle;
-- Over random inputs, with and without the backends' count: no cycle
-- differs from the rule.
WITH c AS (
    SELECT s, (s % 2 = 0) AS with_backend,
           array_agg((32 + (i * 7919 * s) % 5000)::bigint ORDER BY i) AS mv,
           array_agg(CASE WHEN (i * s) % 3 = 0 THEN 0
                          ELSE ((i * 104729 + s) % 60)::bigint END ORDER BY i) AS ov,
           array_agg(((i * 31 + s) % 900)::bigint ORDER BY i) AS al,
           array_agg((((i + s) / 3) * 7 + (i * s) % 5)::bigint ORDER BY i) AS bw
      FROM generate_series(1, 6) s, generate_series(1, 40) i
     GROUP BY s)
SELECT count(*) AS cycles,
       count(*) FILTER (WHERE abs(r.misses - t.misses) > 1e-12
                          OR abs(r.margin - t.margin) > 1e-12
                          OR r.misses IS NULL OR t.misses IS NULL) AS differ,
       count(*) FILTER (WHERE t.misses > 0.001) AS cycles_with_misses
  FROM c,
       LATERAL (SELECT * FROM bgw_jit_replay_pacer(
                  array_fill(100000::bigint, ARRAY[40]), c.mv,
                  woken => array_fill(true, ARRAY[40]), overrun => c.ov,
                  recent_alloc => c.al,
                  backend_writes => CASE WHEN c.with_backend THEN c.bw END,
                  start_backend_writes => CASE WHEN c.with_backend THEN 0 END,
                  start_margin => 1.0, nbuffers => 1000000)) r
       FULL JOIN LATERAL pg_temp.miss_rule(
                  c.mv, c.ov, c.al, CASE WHEN c.with_backend THEN c.bw END,
                  0, 1.0) t USING (cycle);
