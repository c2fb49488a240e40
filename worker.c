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
 * - every cycle is published to shared memory for the SQL views;
 * - SIGTERM from the postmaster is a shutdown (exit 0, as autoprewarm),
 *   from anyone else (pg_terminate_backend) a restart after
 *   bgw_restart_time (exit 1); SIGINT (pg_cancel_backend) is ignored, as
 *   there is no statement to cancel.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <signal.h>
#include <time.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgwriter.h"
#include "postmaster/interrupt.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/smgr.h"
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
	uint64		generation;		/* reset generation the cycle ran in */
	bool		cleared_marks;	/* it cleared the marks for that generation */
	bool		cleaned;		/* a scan ran (enabled, and pages allowed) */
	bool		entered_hibernation;
	int			strategy_buf_id;
} CycleResult;

/* Set by handle_sigterm() when the postmaster itself asked us to stop. */
static volatile sig_atomic_t shutdown_by_postmaster = false;

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

static void set_signal_handlers(void);
static void warn_if_builtin_cleaner(void);
static void run_cycle(CycleResult *result);
static int	clean_ahead(uint32 recent_alloc, int64 strategy_delta,
						int strategy_buf_id, uint32 strategy_passes,
						CycleResult *result);
static void scan_all_buffers(BgwJitCycle *e);
static void publish_cycle(CycleResult *result, uint64 backend_writes);
static void fold_cycle(BgwJitShared *s, CycleResult *result,
					   uint64 backend_writes);
static int64 thread_cpu_us(void);

#ifndef WIN32
/*
 * SIGTERM: a shutdown request, as SignalHandlerForShutdownRequest(), and
 * note whether it came from the postmaster.  Only then is it a shutdown
 * of the server (or an explicit worker termination), after which exit
 * code 0 correctly unregisters us.  From a backend (pg_terminate_backend)
 * or any other process we exit with code 1 and are restarted: the cleaner
 * is part of the server's configuration, not a session to end.
 */
static void
handle_sigterm(int signo, siginfo_t *info, void *context)
{
	int			save_errno = errno;

	if (info != NULL && info->si_pid == PostmasterPid)
		shutdown_by_postmaster = true;
	ShutdownRequestPending = true;
	SetLatch(MyLatch);

	errno = save_errno;
}
#endif

/*
 * Replace the backend-style handlers a bgworker with a database
 * connection starts with: die() would turn SIGTERM into a FATAL, and
 * StatementCancelHandler SIGINT into an ERROR, both ending the worker.
 */
static void
set_signal_handlers(void)
{
#ifndef WIN32
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = handle_sigterm;
	sigemptyset(&act.sa_mask);
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	if (sigaction(SIGTERM, &act, NULL) != 0)
		elog(FATAL, "could not set SIGTERM handler: %m");
#else
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	shutdown_by_postmaster = true;
#endif
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, PG_SIG_IGN);
}

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
	MemoryContext cycle_context;

	set_signal_handlers();
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
	 * No error handler of our own: on ERROR, the bgworker code's handler
	 * logs it and exits with code 1, so the postmaster restarts us after
	 * bgw_restart_time without a crash restart.  On the way out,
	 * shmem_exit() releases LWLocks (a buffer content lock) first, the
	 * auxiliary resource owner our buffer pins, and AtProcExit_Buffers()
	 * any I/O in progress.
	 */

	cycle_context = AllocSetContextCreate(TopMemoryContext,
										  "bgw_jit cycle",
										  ALLOCSET_DEFAULT_SIZES);

	jit_state_init(&jit_state);
	alloc_tracker_init(&alloc_tracker);
	flush_after = 0;
	WritebackContextInit(&wb_context, &flush_after);

	ereport(LOG, (errmsg("bgw_jit worker started")));
	warn_if_builtin_cleaner();

	while (!ShutdownRequestPending)
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

		/*
		 * Our writes' WAL flushes (and, on 16+, I/O statistics) would
		 * otherwise reach pgstat only when we exit; once a second.
		 */
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

	if (shutdown_by_postmaster)
		proc_exit(0);
	ereport(LOG,
			(errmsg("bgw_jit worker terminated by administrator command"),
			 errdetail("The worker will be restarted in %d seconds.",
					   BGW_JIT_RESTART_SECONDS)));
	proc_exit(1);
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

	/*
	 * A reset since the marks were last cleared: they judge writes of the
	 * period that was reset, forget them.  Read the generation before the
	 * cycle's start time, so that every cycle counted after a reset began
	 * after stats_reset.
	 */
	LWLockAcquire(bgw_jit_shared->lock, LW_SHARED);
	result->generation = bgw_jit_shared->reset_generation;
	result->cleared_marks =
		(bgw_jit_shared->marks_generation != result->generation);
	LWLockRelease(bgw_jit_shared->lock);
	if (result->cleared_marks)
		cleaner_clear_marks();

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
	/* the first reading after a reset is the new baseline */
	backend_writes = compat_backend_writes(result->cleared_marks);

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

/* Earlier writes the scan just judged. */
static inline void
count_judgements(BgwJitCycle *e, int outcome)
{
	e->evicted += (outcome & CLEANER_EVICTED) ? 1 : 0;
	e->redirtied += (outcome & CLEANER_REDIRTIED) ? 1 : 0;
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
		{
			CHECK_FOR_INTERRUPTS();
			if (ShutdownRequestPending)
				break;
		}
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
		{
			CHECK_FOR_INTERRUPTS();
			if (ShutdownRequestPending)
				break;
		}
	}
}

/*
 * Publish a cycle: the worker's current state always; the cycle's figures
 * (counters, history, the backend write count read at its start) only if
 * no reset overtook it, as they belong to the period that was reset.
 */
static void
publish_cycle(CycleResult *result, uint64 backend_writes)
{
	BgwJitShared *s = bgw_jit_shared;
	BgwJitCycle *e = &result->entry;

	LWLockAcquire(s->lock, LW_EXCLUSIVE);

	if (result->cleared_marks)
		s->marks_generation = result->generation;

	s->strategy = e->strategy;
	s->strategy_buf_id = result->strategy_buf_id;
	s->last_cycle_at = e->at;
	s->conf_load_time = PgReloadTime;
	if (result->cleaned)
	{
		s->next_to_clean = next_to_clean;
		s->bufs_ahead = e->bufs_ahead;
		s->smoothed_alloc = e->smoothed_alloc;
		s->smoothed_density = e->smoothed_density;
		s->upcoming_alloc_est = e->upcoming_alloc_est;
	}

	if (s->reset_generation == result->generation)
		fold_cycle(s, result, backend_writes);

	LWLockRelease(s->lock);
}

/* Add a cycle to the counters and the history ring; caller holds the lock. */
static void
fold_cycle(BgwJitShared *s, CycleResult *result, uint64 backend_writes)
{
	BgwJitCycle *e = &result->entry;

	s->counters.buf_alloc += e->recent_alloc;
	s->counters.hibernations += result->entered_hibernation ? 1 : 0;

	/*
	 * Going backwards means the count restarted (pg_stat_reset_shared() on
	 * 15, a new worker on 16+).  On 15 buffers_backend rises when the
	 * checkpointer absorbs its queue, and then includes every write we did
	 * before this cycle began: pair the rise with our writes so far, so that
	 * buf_backend can exclude them without subtracting writes not yet
	 * absorbed.  After our own reset the first reading is only the new
	 * baseline.
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

	if (!result->cleaned)
		return;

	s->counters.cycles++;
	s->counters.buf_clean += e->written;
	s->counters.buf_all_clean += e->all_written;
	s->counters.buf_clean_evicted += e->evicted;
	s->counters.buf_clean_redirtied += e->redirtied;
	s->counters.maxwritten_clean += e->hit_maxpages ? 1 : 0;
	s->counters.laps += e->lapped ? 1 : 0;
	s->counters.buffers_scanned += e->scanned;
	s->counters.buffers_reusable += e->reusable_found;

	if (s->history_size > 0)
	{
		e->cycle = s->counters.cycles;
		s->history[s->history_count % s->history_size] = *e;
		s->history_count++;
	}
}

static int64
thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
