--
-- The self-pacing controller (pacer.c), replayed with figures that can be
-- checked by hand.
--
CREATE EXTENSION IF NOT EXISTS bgw_jit;

-- Slow start, then a steady load: the worker sleeps exactly as planned
-- (elapsed = previous sleep) and the hand passes 20 000 buffers/s.  The
-- first interval (200 ms, longer than the 50 ms attack) sets the speed at
-- once; the sleep doubles from 10 ms to bgw_jit.delay; the lead is
-- margin * speed * sleep; every surprise is exactly 1, below the margin,
-- so the margin only steps down, by (1 - 0.99) * (0.02 + 0.1 * (m - 1)).
-- The write budget (nothing is charged here) starts with a second at the
-- lap rate (1e6 buffers / 120 s = 8333 pages) and fills at twice the
-- margin times the allocation rate (here one allocation per buffer the
-- hand passes), 2 * margin * 20000 pages a second.
SELECT cycle, hand_rate, round(surprise::numeric, 4) AS surprise,
       round(margin::numeric, 6) AS margin, sleep_ms, lead_target, min_scan,
       write_budget
  FROM bgw_jit_replay_pacer(
         ARRAY[200000, 10000, 20000, 40000, 80000, 160000, 200000, 200000],
         ARRAY[4000, 200, 400, 800, 1600, 3200, 4000, 4000],
         recent_alloc => ARRAY[4000, 200, 400, 800, 1600, 3200, 4000, 4000],
         nbuffers => 1000000);

-- No oscillation: over 500 steady cycles the margin never rises and the
-- sleep never changes once settled.
SELECT count(*) FILTER (WHERE margin > prev_margin) AS margin_rises,
       count(DISTINCT sleep_ms) FILTER (WHERE cycle > 6) AS sleeps_after_start,
       round(min(margin)::numeric, 4) AS final_margin
  FROM (SELECT cycle, margin, sleep_ms,
               lag(margin) OVER (ORDER BY cycle) AS prev_margin
          FROM bgw_jit_replay_pacer(
                 array_fill(200000::bigint, ARRAY[500]),
                 array_fill(4000::bigint, ARRAY[500]),
                 nbuffers => 1000000,
                 start_hand_rate => 20000, start_planned_ms => 200)) r;

-- A small pool: the sleep is what keeps the planned lead within 3/4 of
-- the pool, 0.75 * 4096 / (1.4993 * 20000 / s) = 102 ms.
SELECT cycle, sleep_ms, lead_target
  FROM bgw_jit_replay_pacer(ARRAY[100000, 100000], ARRAY[2000, 2000],
                            nbuffers => 4096, start_hand_rate => 20000,
                            start_planned_ms => 100);

-- A lone stall (the worker woke 5x late) raises the margin by one step,
-- 0.99 * (0.02 + 0.1 * 0.4993) = 0.0692, not to the stall's size.
SELECT cycle, round(surprise::numeric, 4) AS surprise,
       round(margin::numeric, 6) AS margin
  FROM bgw_jit_replay_pacer(ARRAY[200000, 1000000, 200000],
                            ARRAY[4000, 20000, 4000],
                            nbuffers => 1000000, start_hand_rate => 20000,
                            start_planned_ms => 200);

-- A load step from 5 000 to 50 000 buffers/s: the speed follows within
-- one interval of at least the 50 ms attack time constant, the margin
-- rises by one step, and the sleep shortens at once to keep the lead
-- within 3/4 of the pool.
SELECT cycle, round(hand_rate) AS hand_rate, round(surprise::numeric, 2)
       AS surprise, round(margin::numeric, 4) AS margin, sleep_ms
  FROM bgw_jit_replay_pacer(ARRAY[100000, 100000, 50000, 50000, 50000],
                            ARRAY[500, 5000, 2500, 2500, 2500],
                            nbuffers => 16384, start_hand_rate => 5000,
                            start_planned_ms => 100);

-- Writes found re-dirtied (over 5% of the judged ones) count as a step down.
SELECT cycle, round(margin::numeric, 6) AS margin
  FROM bgw_jit_replay_pacer(ARRAY[200000, 200000], ARRAY[4000, 4000],
                            evicted => ARRAY[100, 90], redirtied => ARRAY[5, 10],
                            nbuffers => 1000000, start_hand_rate => 20000,
                            start_planned_ms => 200);

-- A fixed multiplier is used as given; fixed pacing sleeps bgw_jit.delay.
SELECT cycle, margin, sleep_ms, lead_target
  FROM bgw_jit_replay_pacer(ARRAY[200000, 200000], ARRAY[4000, 4000],
                            lru_multiplier => '3', pacing => 'fixed',
                            delay => 50, nbuffers => 1000000,
                            start_hand_rate => 20000, start_planned_ms => 50);

-- The rate budget: 8 MB/s is 1024 pages/s, below the automatic rate of
-- 100000 allocations/s.  The bucket starts with the floor's 1000 pages
-- and holds one second; each cycle adds 102.4 pages and is charged what
-- was written.
SELECT cycle, write_budget
  FROM bgw_jit_replay_pacer(array_fill(100000::bigint, ARRAY[4]),
                            array_fill(10000::bigint, ARRAY[4]),
                            recent_alloc => array_fill(10000::bigint, ARRAY[4]),
                            written => ARRAY[1024, 102, 102, 0],
                            max_write_rate => 8, nbuffers => 4096);
-- ...within the per-cycle cap of bgw_jit.lru_maxpages.
SELECT cycle, write_budget
  FROM bgw_jit_replay_pacer(ARRAY[100000], ARRAY[0], max_write_rate => 8,
                            lru_maxpages => 100, nbuffers => 4096);

-- Misses close the loop: the hand ran past the cleaned frontier by 5%,
-- 0.5% and 0.05% of its movement (overrun 100, 10, 1 of 2000).  Above
-- 0.1% the margin rises at once, by 0.25 * min(1, misses / 1%): +0.25,
-- then +0.125; at 0.05% it only steps down as before.
SELECT cycle, round(misses::numeric, 4) AS misses,
       round(margin::numeric, 6) AS margin
  FROM bgw_jit_replay_pacer(array_fill(100000::bigint, ARRAY[4]),
                            array_fill(2000::bigint, ARRAY[4]),
                            overrun => ARRAY[0, 100, 10, 1],
                            nbuffers => 100000, start_hand_rate => 20000,
                            start_planned_ms => 100);
-- From 16 the backends' own writes of dirty victims count too, over the
-- allocations since they last moved, but only over a stretch in which the
-- hand also ran past the frontier: the first 40 (no overrun) are not a
-- miss the margin could have spared; the next 40 over 4000 allocations,
-- with an overrun of 5 in between, are 1%.
SELECT cycle, round(misses::numeric, 4) AS misses
  FROM bgw_jit_replay_pacer(array_fill(100000::bigint, ARRAY[4]),
                            array_fill(2000::bigint, ARRAY[4]),
                            overrun => ARRAY[0, 0, 5, 0],
                            recent_alloc => array_fill(2000::bigint, ARRAY[4]),
                            backend_writes => ARRAY[0, 40, 40, 80],
                            nbuffers => 100000, start_hand_rate => 20000,
                            start_planned_ms => 100);
-- What a cycle that sees no movement may write: the rate the scans wrote
-- at, while allocations last, or one lap per scan_whole_pool_seconds,
-- whichever is more, for the time since the previous cycle began (at most
-- one delay).  smoothing_samples 1: each rate is the last interval's.
-- 1: nothing written yet: the lap, 1000 pages/s for 200 ms.  2: 1000
-- pages written in 200 ms, 20000 allocations/s: 5000/s, not 20000/s.
-- 3: 10 ms later (a sliced cycle's continuation), 50 pages, not a whole
-- sleep's.  4: after 5 s of hibernation with no allocation: the lap, for
-- one delay.  The hand's speed (200000/s) counts for none of it.
SELECT cycle, idle_pages
  FROM bgw_jit_replay_pacer(ARRAY[200000, 200000, 10000, 5000000],
                            ARRAY[40000, 40000, 2000, 0],
                            ARRAY[1000, 50, 0, 0],
                            recent_alloc => ARRAY[4000, 4000, 200, 0],
                            smoothing_samples => 1,
                            scan_whole_pool_seconds => 1000,
                            nbuffers => 1000000, start_hand_rate => 200000,
                            start_planned_ms => 200);
SELECT cycle, idle_pages
  FROM bgw_jit_replay_pacer(ARRAY[200000], ARRAY[0], nbuffers => 1000000,
                            start_planned_ms => 200);

-- An early wake-up (woken) forgets the plan: no surprise is judged and the
-- sleep starts again from 10 ms.
SELECT cycle, round(surprise::numeric, 2) AS surprise, sleep_ms
  FROM bgw_jit_replay_pacer(ARRAY[200000, 3000], ARRAY[4000, 60],
                            woken => ARRAY[false, true], nbuffers => 1000000,
                            start_hand_rate => 20000, start_planned_ms => 200);

-- Bad input.
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1, 2], ARRAY[1]);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], woken => ARRAY[true, false]);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], woken => ARRAY[NULL::boolean]);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[-1]);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], lru_multiplier => 'fast');
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], lru_multiplier => '11');
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], pacing => 'slow');
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], delay => 5);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], lru_maxpages => -2);
SELECT * FROM bgw_jit_replay_pacer(ARRAY[1], ARRAY[1], start_margin => 0.5);
SELECT * FROM bgw_jit_replay_pacer(NULL, ARRAY[1]);

-- The settings: lru_multiplier takes auto or a number, nothing else.
SHOW bgw_jit.lru_multiplier;
SHOW bgw_jit.pacing;
SHOW bgw_jit.lru_maxpages;
SHOW bgw_jit.max_write_rate;
SHOW bgw_jit.flush_after;
SHOW bgw_jit.cpu_priority;
ALTER SYSTEM SET bgw_jit.lru_multiplier = 'fast';
ALTER SYSTEM SET bgw_jit.lru_multiplier = '10.5';
ALTER SYSTEM SET bgw_jit.lru_multiplier = '-1';
ALTER SYSTEM SET bgw_jit.lru_multiplier = '';
ALTER SYSTEM SET bgw_jit.lru_multiplier = ' 2.5 ';
ALTER SYSTEM SET bgw_jit.lru_multiplier = 'AUTO';
ALTER SYSTEM SET bgw_jit.lru_multiplier = 0;
ALTER SYSTEM RESET bgw_jit.lru_multiplier;
ALTER SYSTEM SET bgw_jit.pacing = 'slow';
ALTER SYSTEM SET bgw_jit.max_write_rate = -1;
ALTER SYSTEM SET bgw_jit.max_write_rate = 100001;
ALTER SYSTEM SET bgw_jit.lru_maxpages = -2;
ALTER SYSTEM SET bgw_jit.cpu_priority = 'realtime';
-- SCHED_IDLE (up to 1.3): refused, with the reason
ALTER SYSTEM SET bgw_jit.cpu_priority = 'idle';
SELECT name, setting, vartype, enumvals
  FROM pg_settings
 WHERE name IN ('bgw_jit.lru_multiplier', 'bgw_jit.pacing',
                'bgw_jit.max_write_rate', 'bgw_jit.lru_maxpages',
                'bgw_jit.flush_after', 'bgw_jit.cpu_priority')
 ORDER BY name;
