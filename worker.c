/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The bgw_jit background worker: one just-in-time cleaning cycle every
 *		bgw_jit.delay milliseconds, after PostgreSQL 15's BgBufferSync().
 *
 * Differences from core, each deliberate:
 * - allocations are counted without resetting the shared counter that
 *   pg_stat_bgwriter.buffers_alloc depends on (see estimator.c);
 * - when idle the worker cannot ask to be woken by the next allocation
 *   (StrategyNotifyBgWriter's single slot is the built-in writer's), so it
 *   backs off by doubling its sleep up to IDLE_SLEEP_MAX_MS;
 * - every cycle is published to shared memory for the SQL views.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <time.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgwriter.h"
#include "postmaster/interrupt.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/condition_variable.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/smgr.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "bgw_jit.h"
#include "compat.h"
#include "estimator.h"

/* Longest sleep while idle: bounds the reaction to a sudden load. */
#define IDLE_SLEEP_MAX_MS	1000

/* What a cycle hands to publish_cycle(). */
typedef struct CycleResult
{
	BgwJitCycle entry;
	bool		cleaned;		/* the scan ran (enabled, maxpages > 0) */
	bool		entered_hibernation;
	int			strategy_buf_id;
} CycleResult;

/* State carried between cycles, private to the worker. */
static bool hand_valid = false;
static int	prev_strategy_buf_id;
static uint32 prev_strategy_passes;
static uint64 hand_position;	/* cumulative clock-hand movement */

static bool cleaner_valid = false;
static int	next_to_clean;
static uint32 next_passes;

static int	all_next_to_clean = 0;	/* the all-buffers scan's position */

static JitState jit_state;
static AllocTracker alloc_tracker;
static WritebackContext wb_context;
static int	flush_after;		/* bgw_jit.flush_after, -1 resolved */

static int	idle_sleep_ms = 0;	/* 0 while not idle */

static void warn_if_builtin_cleaner(void);
static void run_cycle(CycleResult *result);
static int	clean_ahead(uint32 recent_alloc, int64 strategy_delta,
						int strategy_buf_id, uint32 strategy_passes,
						CycleResult *result);
static void scan_all_buffers(BgwJitCycle *e);
static void publish_cycle(CycleResult *result, uint64 backend_writes);
static int64 thread_cpu_us(void);

/*
 * Both cleaners working the same buffers waste writes and hide each
 * other's figures; say so, but leave the user's setting alone.
 */
static void
warn_if_builtin_cleaner(void)
{
	if (bgw_jit_enabled && bgwriter_lru_maxpages > 0)
		ereport(WARNING,
				(errmsg("the built-in background writer also cleans buffers (bgwriter_lru_maxpages = %d)",
						bgwriter_lru_maxpages),
				 errhint("Set bgwriter_lru_maxpages = 0 so that only bgw_jit cleans.")));
}

void
bgw_jit_main(Datum main_arg)
{
	sigjmp_buf	local_sigjmp_buf;
	MemoryContext cycle_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: we only touch shared buffers, but appear as a backend. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("bgw_jit");

	/* Without a resource owner the first pin would crash. */
	CreateAuxProcessResourceOwner();

	/*
	 * Read pgstat's shared counters afresh on every call instead of building
	 * a snapshot (which in "snapshot" mode would copy every table's stats).
	 */
	SetConfigOption("stats_fetch_consistency", "none",
					PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * On ERROR: release what core's bgwriter releases, then exit(1) so the
	 * postmaster restarts us after bgw_restart_time without a cluster-wide
	 * crash restart.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		error_context_stack = NULL;
		HOLD_INTERRUPTS();
		EmitErrorReport();
		LWLockReleaseAll();
		ConditionVariableCancelSleep();
		compat_abort_buffer_io();
		UnlockBuffers();
		ReleaseAuxProcessResources(false);
		AtEOXact_Buffers(false);
		AtEOXact_SMgr();
		AtEOXact_Files(false);
		proc_exit(1);
	}
	PG_exception_stack = &local_sigjmp_buf;

	cycle_context = AllocSetContextCreate(TopMemoryContext,
										  "bgw_jit cycle",
										  ALLOCSET_DEFAULT_SIZES);

	jit_state_init(&jit_state);
	alloc_tracker_init(&alloc_tracker);
	flush_after = 0;
	WritebackContextInit(&wb_context, &flush_after);

	ereport(LOG, (errmsg("bgw_jit worker started")));
	warn_if_builtin_cleaner();

	for (;;)
	{
		CycleResult result;
		long		sleep_ms;
		MemoryContext oldcontext;

		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			warn_if_builtin_cleaner();
		}

		/* Don't keep files of dropped relations open across checkpoints. */
		if (FirstCallSinceLastCheckpoint())
			compat_smgr_free_all();

		flush_after = (bgw_jit_flush_after >= 0) ? bgw_jit_flush_after :
			bgwriter_flush_after;

		oldcontext = MemoryContextSwitchTo(cycle_context);
		run_cycle(&result);
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(cycle_context);

		/* our writes into pg_stat_io now, not at exit (rate-limited) */
		compat_report_stat();

		/*
		 * Idle back-off: once a cycle had nothing to do, double the sleep on
		 * each further idle cycle, up to IDLE_SLEEP_MAX_MS.
		 */
		sleep_ms = bgw_jit_delay;
		if (result.entered_hibernation || idle_sleep_ms > 0)
		{
			if (idle_sleep_ms == 0)
				idle_sleep_ms = bgw_jit_delay;
			else
				idle_sleep_ms = Min(idle_sleep_ms * 2,
									Max(IDLE_SLEEP_MAX_MS, bgw_jit_delay));
			sleep_ms = idle_sleep_ms;
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * One cycle: read the clock hand and the allocations, clean ahead of the
 * hand if enabled, publish the outcome.
 */
static void
run_cycle(CycleResult *result)
{
	int64		cpu_start = thread_cpu_us();
	int			strategy_buf_id;
	uint32		strategy_passes;
	int64		strategy_delta = 0;
	uint32		recent_alloc;
	uint64		backend_writes;
	bool		can_idle;

	memset(result, 0, sizeof(*result));
	result->entry.at = GetCurrentTimestamp();

	/* Read the hand only: passing an alloc pointer would reset the counter. */
	strategy_buf_id = StrategySyncStart(&strategy_passes, NULL);
	if (hand_valid)
	{
		int32		passes_delta = strategy_passes - prev_strategy_passes;

		strategy_delta = strategy_buf_id - prev_strategy_buf_id;
		strategy_delta += (int64) passes_delta * NBuffers;
	}
	prev_strategy_buf_id = strategy_buf_id;
	prev_strategy_passes = strategy_passes;
	hand_valid = true;
	hand_position += strategy_delta;

	recent_alloc = alloc_tracker_step(&alloc_tracker,
									  compat_shared_buf_alloc(),
									  hand_position,
									  &result->entry.alloc_reported);
	backend_writes = compat_backend_writes();

	result->strategy_buf_id = strategy_buf_id;
	result->entry.strategy = bgw_jit_strategy;
	result->entry.recent_alloc = recent_alloc;
	result->entry.strategy_delta = strategy_delta;

	can_idle = (recent_alloc == 0);
	if (bgw_jit_enabled && bgw_jit_lru_maxpages > 0)
	{
		int			bufs_to_lap;

		bufs_to_lap = clean_ahead(recent_alloc, strategy_delta,
								  strategy_buf_id, strategy_passes, result);
		result->cleaned = true;
		can_idle = can_idle && bufs_to_lap == 0;
	}
	else
	{
		/* Like core with lru_maxpages = 0: restart at the hand later. */
		cleaner_valid = false;
	}

	if (bgw_jit_enabled && bgw_jit_strategy == BGW_JIT_STRATEGY_JIT_ALL &&
		bgw_jit_all_maxpages > 0 && bgw_jit_all_percent > 0)
	{
		scan_all_buffers(&result->entry);
		result->cleaned = true;
	}

	if (!can_idle)
		idle_sleep_ms = 0;
	else if (idle_sleep_ms == 0)
		result->entered_hibernation = true;

	result->entry.smoothed_alloc = jit_state.smoothed_alloc;
	result->entry.smoothed_density = jit_state.smoothed_density;
	result->entry.cpu_us = thread_cpu_us() - cpu_start;
	publish_cycle(result, backend_writes);
}

/* Earlier writes the scan just judged useful or wasted. */
static inline void
count_judgements(BgwJitCycle *e, int outcome)
{
	e->useful += (outcome & CLEANER_USEFUL) ? 1 : 0;
	e->wasted += (outcome & CLEANER_WASTED) ? 1 : 0;
}

/*
 * The LRU scan proper.  Fills in result->entry; returns how many buffers
 * the cleaner could still scan before lapping the hand.
 */
static int
clean_ahead(uint32 recent_alloc, int64 strategy_delta,
			int strategy_buf_id, uint32 strategy_passes,
			CycleResult *result)
{
	BgwJitCycle *e = &result->entry;
	JitParams	params;
	JitEstimate est;
	bool		lap = (bgw_jit_strategy == BGW_JIT_STRATEGY_LAP);
	int			bufs_to_lap;
	int			num_to_scan;
	int			scan_limit;
	int			reusable_buffers;

	/*
	 * Where is the cleaner relative to the hand?  The casts to int32 keep
	 * the pass comparisons right when the counters wrap around.
	 */
	if (cleaner_valid && (int32) (next_passes - strategy_passes) > 0)
		bufs_to_lap = strategy_buf_id - next_to_clean;	/* a pass ahead */
	else if (cleaner_valid && next_passes == strategy_passes &&
			 next_to_clean >= strategy_buf_id)
		bufs_to_lap = NBuffers - (next_to_clean - strategy_buf_id);
	else
	{
		/* Lapped by the hand, or (re)starting: clean from the hand on. */
		if (cleaner_valid)
			e->lapped = true;
		next_to_clean = strategy_buf_id;
		next_passes = strategy_passes;
		bufs_to_lap = NBuffers;
	}
	/* The first cycle after (re)starting has no hand movement to learn from. */
	if (!cleaner_valid)
		strategy_delta = 0;
	cleaner_valid = true;

	params.multiplier = bgw_jit_lru_multiplier;
	params.smoothing_samples = bgw_jit_smoothing_samples;
	params.delay_ms = bgw_jit_delay;
	params.scan_whole_pool_seconds = bgw_jit_scan_whole_pool_seconds;
	params.nbuffers = NBuffers;

	e->bufs_ahead = NBuffers - bufs_to_lap;
	e->strategy_delta = strategy_delta;
	jit_estimate(&jit_state, &params, recent_alloc, strategy_delta,
				 e->bufs_ahead, &est);

	/*
	 * jit scans until enough reusable buffers are ahead; lap scans a fixed
	 * share of the pool, the estimate computed only to keep the averages
	 * current for a switch back.  Both stop short of lapping the hand.
	 */
	num_to_scan = bufs_to_lap;
	if (lap)
		num_to_scan = Min(num_to_scan,
						  (int) ceil(NBuffers * bgw_jit_lru_percent / 100.0));
	scan_limit = num_to_scan;
	reusable_buffers = est.reusable_buffers_est;
	while (num_to_scan > 0 &&
		   (lap || reusable_buffers < est.upcoming_alloc_est))
	{
		int			outcome = cleaner_sync_buffer(next_to_clean, &wb_context,
												  false);

		count_judgements(e, outcome);

		if (++next_to_clean >= NBuffers)
		{
			next_to_clean = 0;
			next_passes++;
		}
		num_to_scan--;

		if (outcome & CLEANER_REUSABLE)
			reusable_buffers++;
		if (outcome & CLEANER_WRITTEN)
		{
			if (++e->written >= bgw_jit_lru_maxpages)
			{
				e->hit_maxpages = true;
				break;
			}
		}

		/* A long scan must still answer DROP DATABASE's barrier promptly. */
		if ((num_to_scan & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	e->scanned = scan_limit - num_to_scan;
	e->reusable_found = reusable_buffers - est.reusable_buffers_est;
	jit_refine_density(&jit_state, &params, e->scanned, e->reusable_found);

	e->upcoming_alloc_est = est.upcoming_alloc_est;

	return bufs_to_lap;
}

/*
 * The 8.x "all buffers" scan of jit+all: its own circular position, a
 * fixed share of the pool per cycle, dirty unpinned buffers written
 * whatever their usage count, to spread out checkpoint writes.
 */
static void
scan_all_buffers(BgwJitCycle *e)
{
	int			num_to_scan = (int) Min(ceil(NBuffers * bgw_jit_all_percent / 100.0),
										NBuffers);

	while (num_to_scan-- > 0 && e->all_written < bgw_jit_all_maxpages)
	{
		int			outcome = cleaner_sync_buffer(all_next_to_clean, &wb_context,
												  true);

		count_judgements(e, outcome);
		e->all_written += (outcome & CLEANER_WRITTEN) ? 1 : 0;
		if (++all_next_to_clean >= NBuffers)
			all_next_to_clean = 0;
		if ((num_to_scan & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

/* Fold a cycle into the shared counters, state and history ring. */
static void
publish_cycle(CycleResult *result, uint64 backend_writes)
{
	BgwJitShared *s = bgw_jit_shared;
	BgwJitCycle *e = &result->entry;

	LWLockAcquire(s->lock, LW_EXCLUSIVE);

	s->counters.buf_alloc += e->recent_alloc;
	s->counters.hibernations += result->entered_hibernation ? 1 : 0;

	/*
	 * Going backwards means the count restarted (pg_stat_reset_shared() on
	 * 15, a new worker on 16+).  On 15 buffers_backend rises when the
	 * checkpointer absorbs its queue, and then includes every write we did
	 * before this cycle began: pair the rise with our writes so far, so that
	 * buf_backend can exclude them without subtracting writes not yet
	 * absorbed.
	 */
	if (s->backend_seen_valid && backend_writes != s->backend_seen)
	{
		s->counters.backend_writes += (backend_writes > s->backend_seen) ?
			backend_writes - s->backend_seen : backend_writes;
		if (COMPAT_BACKEND_WRITES_INCLUDE_OWN)
			s->counters.own_writes_absorbed = s->counters.buf_clean +
				s->counters.buf_all_clean;
	}
	s->backend_seen = backend_writes;
	s->backend_seen_valid = true;

	s->strategy = e->strategy;
	s->strategy_buf_id = result->strategy_buf_id;
	s->last_cycle_at = e->at;

	if (result->cleaned)
	{
		s->counters.cycles++;
		s->counters.buf_clean += e->written;
		s->counters.buf_all_clean += e->all_written;
		s->counters.buf_clean_useful += e->useful;
		s->counters.buf_clean_wasted += e->wasted;
		s->counters.maxwritten_clean += e->hit_maxpages ? 1 : 0;
		s->counters.laps += e->lapped ? 1 : 0;
		s->counters.buffers_scanned += e->scanned;
		s->counters.buffers_reusable += e->reusable_found;

		s->next_to_clean = next_to_clean;
		s->bufs_ahead = e->bufs_ahead;
		s->smoothed_alloc = e->smoothed_alloc;
		s->smoothed_density = e->smoothed_density;
		s->upcoming_alloc_est = e->upcoming_alloc_est;

		if (s->history_size > 0)
		{
			e->cycle = s->counters.cycles;
			s->history[s->history_count % s->history_size] = *e;
			s->history_count++;
		}
	}

	LWLockRelease(s->lock);
}

static int64
thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
