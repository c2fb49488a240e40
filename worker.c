/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The bgw_jit background worker: cleaning cycles that keep a clean
 *		reserve just ahead of the clock sweep, after PostgreSQL 15's
 *		BgBufferSync().
 *
 * With bgw_jit.pacing = auto (the default) the controller in pacer.c
 * chooses each sleep and how far ahead to clean from the clock hand's
 * measured speed; with fixed, cycles come every bgw_jit.delay and the scan
 * stops where core's estimate (estimator.c) says.  Differences from core,
 * each deliberate:
 * - allocations are counted without resetting the shared counter that
 *   pg_stat_bgwriter.buffers_alloc depends on (see estimator.c);
 * - when idle the worker cannot ask to be woken by the next allocation
 *   (StrategyNotifyBgWriter's single slot is the built-in writer's), so it
 *   hibernates until a backend starts a statement (bgw_jit.c's hooks set
 *   its latch) or HIBERNATE_MS pass;
 * - the writes are rationed by a rate, not only per cycle, so that pacing
 *   cannot change the cap;
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
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
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
#include "pacer.h"

/*
 * Sleep while hibernating.  Statement starts wake the worker at once; this
 * bounds the reaction to allocations no statement announces (recovery,
 * autovacuum).
 */
#define HIBERNATE_MS	1000

/*
 * Idle cycles must span this long before the worker hibernates, so that a
 * trickle of statements that allocate nothing (a cached read-only load)
 * wakes it a few times a second, not once per statement.
 */
#define HIBERNATE_AFTER_MS	1000

/* What a cycle hands to publish_cycle(). */
typedef struct CycleResult
{
	BgwJitCycle entry;
	uint64		generation;		/* reset generation the cycle ran in */
	bool		cleared_marks;	/* it cleared the marks for that generation */
	bool		cleaned;		/* the scan ran (enabled, maxpages != 0) */
	bool		idle;			/* no allocations, nothing left to scan */
	bool		hibernate;		/* idle for HIBERNATE_AFTER_MS: sleep long */
	int			strategy_buf_id;
	TimestampTz bgwriter_reset; /* pg_stat_bgwriter.stats_reset at start */
} CycleResult;

/* Set by handle_sigterm() when the postmaster itself asked us to stop. */
static volatile sig_atomic_t shutdown_by_postmaster = false;

/* State carried between cycles, private to the worker. */
static bool hand_valid = false;
static int	prev_strategy_buf_id;
static uint32 prev_strategy_passes;
static int64 hand_position;		/* cumulative clock-hand movement */

/*
 * The cleaner's frontier in the same coordinate as hand_position: the
 * next buffer to examine is clean_position mod NBuffers, and the buffers
 * between the hand and the frontier have been scanned since the hand last
 * passed them.
 */
static bool cleaner_valid = false;
static int64 clean_position;

static int	all_next_to_clean = 0;	/* the all-buffers scan's position */

static JitState jit_state;
static PacerState pacer_state;
static AllocTracker alloc_tracker;
static WritebackContext wb_context;
static int	flush_after;		/* bgw_jit.flush_after, -1 resolved */

static TimestampTz prev_cycle_at = 0;
static bool was_hibernating = false;
static TimestampTz idle_since = 0;	/* first of the current idle cycles */
static bool timed_out = true;	/* the last sleep ended by its timeout */
static int	prev_evicted = 0;	/* judgements of the previous cycle */
static int	prev_redirtied = 0;
static int	applied_cpu_priority = BGW_JIT_CPU_PRIORITY_NORMAL;
static int	base_nice = 0;		/* the nice value the worker started with */

static void set_signal_handlers(void);
static void warn_if_builtin_cleaner(void);
static void apply_cpu_priority(void);
static void pacer_params(PacerParams *params);
static void run_cycle(CycleResult *result);
static void clean_ahead(uint32 recent_alloc, int64 strategy_delta,
						const PacerPlan *plan, CycleResult *result);
static void scan_all_buffers(BgwJitCycle *e);
static void publish_cycle(CycleResult *result, uint64 backend_writes);
static void fold_bgwriter_share(BgwJitShared *s, CycleResult *result,
								uint64 backend_writes);
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

/*
 * bgw_jit.cpu_priority: nice 10 (or the server's own nice value, if that
 * is lower still) for low, SCHED_IDLE for idle, the server's nice value
 * for normal.  Lowering always works; raising it again needs CAP_SYS_NICE
 * (or RLIMIT_NICE), so without it the worker stays where it is until it
 * restarts.
 */
static void
apply_cpu_priority(void)
{
	struct sched_param param;
	bool		idle = (bgw_jit_cpu_priority == BGW_JIT_CPU_PRIORITY_IDLE);
	int			nice_value = (bgw_jit_cpu_priority == BGW_JIT_CPU_PRIORITY_LOW) ?
		Max(base_nice, BGW_JIT_LOW_PRIORITY_NICE) : base_nice;

	if (bgw_jit_cpu_priority == applied_cpu_priority)
		return;

	/* the nice value means nothing under SCHED_IDLE: leave it alone */
	memset(&param, 0, sizeof(param));
	if (sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &param) != 0 ||
		(!idle && setpriority(PRIO_PROCESS, 0, nice_value) != 0))
	{
		ereport(WARNING,
				(errmsg("could not change the CPU priority of the bgw_jit worker to \"%s\": %m",
						bgw_jit_cpu_priority_name(bgw_jit_cpu_priority)),
				 errdetail("The worker keeps CPU priority \"%s\".",
						   bgw_jit_cpu_priority_name(applied_cpu_priority)),
				 errhint("Raising the priority again takes effect when the server restarts.")));
		/* don't retry every cycle */
		bgw_jit_cpu_priority = applied_cpu_priority;
		return;
	}
	applied_cpu_priority = bgw_jit_cpu_priority;
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
	{
		PacerParams params;

		pacer_params(&params);
		pacer_init(&pacer_state, &params);
	}
	alloc_tracker_init(&alloc_tracker);
	flush_after = 0;
	WritebackContextInit(&wb_context, &flush_after);
	bgw_jit_shared->worker_latch = MyLatch;

	ereport(LOG, (errmsg("bgw_jit worker started")));
	warn_if_builtin_cleaner();
	errno = 0;
	base_nice = getpriority(PRIO_PROCESS, 0);
	if (errno != 0)
		base_nice = 0;
	apply_cpu_priority();

	while (!ShutdownRequestPending)
	{
		CycleResult result;
		MemoryContext oldcontext;
		bool		armed;
		int			rc;

		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			warn_if_builtin_cleaner();
			apply_cpu_priority();
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
		 * An idle worker asks the next statement start to set its latch
		 * (bgw_jit.c's hooks), so that a load arriving during a long sleep
		 * is met at once.  Not right after such a wake-up, though, unless
		 * idleness has lasted: statements that allocate nothing would
		 * otherwise wake it every time.
		 */
		armed = result.idle && (timed_out || result.hibernate);
		if (armed)
			pg_atomic_write_u32(&bgw_jit_shared->hibernating, 1);
		rc = WaitLatch(MyLatch,
					   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   result.hibernate ? Max(HIBERNATE_MS, bgw_jit_delay) :
					   result.entry.sleep_ms,
					   PG_WAIT_EXTENSION);
		if (armed)
			pg_atomic_write_u32(&bgw_jit_shared->hibernating, 0);
		ResetLatch(MyLatch);

		timed_out = (rc & WL_TIMEOUT) != 0;
		if (!timed_out)
		{
			/* load is coming: probe it before trusting an idle rate */
			pacer_restart(&pacer_state);
			idle_since = 0;
		}
	}

	if (shutdown_by_postmaster)
		proc_exit(0);
	ereport(LOG,
			(errmsg("bgw_jit worker terminated by administrator command"),
			 errdetail("The worker will be restarted in %d seconds.",
					   BGW_JIT_RESTART_SECONDS)));
	proc_exit(1);
}

/* The controller's settings, from the GUCs. */
static void
pacer_params(PacerParams *params)
{
	params->margin = bgw_jit_lru_multiplier;
	params->self_paced = (bgw_jit_pacing == BGW_JIT_PACING_AUTO &&
						  bgw_jit_strategy == BGW_JIT_STRATEGY_JIT);
	params->max_sleep_ms = bgw_jit_delay;
	params->smoothing_samples = bgw_jit_smoothing_samples;
	params->scan_whole_pool_seconds = bgw_jit_scan_whole_pool_seconds;
	params->nbuffers = NBuffers;
	params->write_rate = bgw_jit_max_write_rate * (1024.0 * 1024.0 / BLCKSZ);
	params->maxpages = bgw_jit_lru_maxpages;
}

/*
 * One cycle: read the clock hand and the allocations, let the controller
 * plan, clean ahead of the hand if enabled, publish the outcome.
 */
static void
run_cycle(CycleResult *result)
{
	BgwJitCycle *e = &result->entry;
	int64		cpu_start = thread_cpu_us();
	int			strategy_buf_id;
	uint32		strategy_passes;
	int64		strategy_delta = 0;
	uint32		recent_alloc;
	uint64		backend_writes;
	PacerParams params;
	PacerInput	in;
	PacerPlan	plan;
	bool		idle;

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

	e->at = GetCurrentTimestamp();
	e->elapsed_us = (prev_cycle_at != 0) ? e->at - prev_cycle_at : 0;
	e->woken = !timed_out;
	prev_cycle_at = e->at;

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
									  (uint64) hand_position,
									  &e->alloc_reported);
	/*
	 * pg_stat_bgwriter's period, read before buffers_backend and before any
	 * write: what the cycle reads and writes is of this period or later.
	 */
	result->bgwriter_reset = compat_bgwriter_stats_reset();
	/* the first reading after a reset is the new baseline */
	backend_writes = compat_backend_writes(result->cleared_marks);

	result->strategy_buf_id = strategy_buf_id;
	e->strategy = bgw_jit_strategy;
	e->recent_alloc = recent_alloc;
	e->strategy_delta = strategy_delta;

	pacer_params(&params);
	in.elapsed_us = e->elapsed_us;
	in.hand_moved = strategy_delta;
	in.evicted = prev_evicted;
	in.redirtied = prev_redirtied;
	pacer_plan(&pacer_state, &params, &in, &plan);
	e->surprise = plan.surprise;
	e->margin = plan.margin;
	e->hand_rate = pacer_state.hand_rate;
	e->lead_target = plan.lead_target;
	e->sleep_ms = plan.sleep_ms;

	idle = (recent_alloc == 0 && strategy_delta == 0);
	if (bgw_jit_enabled && bgw_jit_lru_maxpages != 0)
	{
		clean_ahead(recent_alloc, strategy_delta, &plan, result);
		result->cleaned = true;
		/* idle only once the cleaner is a whole lap ahead */
		idle &= (e->bufs_ahead + e->scanned >= NBuffers);
	}
	else
	{
		/* Like core with lru_maxpages = 0: restart at the hand later. */
		cleaner_valid = false;
	}

	if (bgw_jit_enabled && bgw_jit_strategy == BGW_JIT_STRATEGY_JIT_ALL &&
		bgw_jit_all_maxpages > 0 && bgw_jit_all_percent > 0)
	{
		scan_all_buffers(e);
		result->cleaned = true;
	}

	if (!idle)
		idle_since = 0;
	else if (idle_since == 0)
		idle_since = e->at;
	result->idle = idle;
	result->hibernate = idle &&
		TimestampDifferenceExceeds(idle_since, e->at, HIBERNATE_AFTER_MS);

	pacer_charge(&pacer_state, &params, e->written + e->all_written);
	prev_evicted = e->evicted;
	prev_redirtied = e->redirtied;

	e->smoothed_alloc = jit_state.smoothed_alloc;
	e->smoothed_density = jit_state.smoothed_density;
	e->cpu_us = thread_cpu_us() - cpu_start;
	publish_cycle(result, backend_writes);
}

/*
 * Neighbours a write took along (cleaner_sync_buffer only visits them after
 * a write): add their judgements, clear *c and return how many it wrote.
 */
static inline int
take_combined(BgwJitCycle *e, CleanerCombined *c)
{
	int			written = c->written;

	e->combined += written;
	e->evicted += c->evicted;
	e->redirtied += c->redirtied;
	memset(c, 0, sizeof(*c));
	return written;
}

/* Earlier writes the scan just judged. */
static inline void
count_judgements(BgwJitCycle *e, int outcome)
{
	e->evicted += (outcome & CLEANER_EVICTED) ? 1 : 0;
	e->redirtied += (outcome & CLEANER_REDIRTIED) ? 1 : 0;
}

/*
 * The LRU scan proper; fills in result->entry.
 *
 * Self-paced jit scans until the frontier is plan->lead_target buffers
 * ahead of the hand; fixed-paced jit until core's estimate of reusable
 * buffers is found; lap a fixed share of the pool.  All stop at the write
 * budget and short of lapping the hand.
 */
static void
clean_ahead(uint32 recent_alloc, int64 strategy_delta,
			const PacerPlan *plan, CycleResult *result)
{
	BgwJitCycle *e = &result->entry;
	JitParams	params;
	JitEstimate est;
	bool		lap = (bgw_jit_strategy == BGW_JIT_STRATEGY_LAP);
	bool		self_paced = (!lap && bgw_jit_pacing == BGW_JIT_PACING_AUTO &&
							  bgw_jit_strategy == BGW_JIT_STRATEGY_JIT);
	int64		lead = clean_position - hand_position;
	int			next_to_clean;
	int			num_to_scan;
	int			scan_limit;
	int			reusable_buffers;
	CleanerCombined combined = {0};

	if (!cleaner_valid || lead < 0)
	{
		/* Lapped by the hand, or (re)starting: clean from the hand on. */
		if (cleaner_valid)
		{
			e->lapped = true;
			e->overrun = -lead;
		}
		clean_position = hand_position;
		lead = 0;
		/* no hand movement to learn from after (re)starting */
		if (!cleaner_valid)
			strategy_delta = 0;
	}
	cleaner_valid = true;
	e->bufs_ahead = (int) lead;

	params.multiplier = plan->margin;
	params.smoothing_samples = bgw_jit_smoothing_samples;
	params.delay_ms = bgw_jit_delay;
	params.scan_whole_pool_seconds = bgw_jit_scan_whole_pool_seconds;
	params.nbuffers = NBuffers;
	jit_estimate(&jit_state, &params, recent_alloc, strategy_delta,
				 e->bufs_ahead, &est);
	e->upcoming_alloc_est = est.upcoming_alloc_est;

	num_to_scan = NBuffers - e->bufs_ahead;
	if (lap)
		num_to_scan = Min(num_to_scan,
						  (int) ceil(NBuffers * bgw_jit_lru_percent / 100.0));
	else if (self_paced && (strategy_delta != 0 || recent_alloc != 0))
		num_to_scan = Min(num_to_scan,
						  Max(plan->lead_target - e->bufs_ahead, plan->min_scan));

	/*
	 * (A self-paced cycle that saw no movement at all scans the whole lap:
	 * the time is free, the dirty pages it finds would be written by the
	 * next checkpoint anyway, and the worker can hibernate at once, to be
	 * woken by the next statement instead of sleeping through its start.)
	 */
	scan_limit = num_to_scan;
	reusable_buffers = est.reusable_buffers_est;
	next_to_clean = (int) (clean_position % NBuffers);

	while (num_to_scan > 0 &&
		   (lap || self_paced || reusable_buffers < est.upcoming_alloc_est))
	{
		int			outcome;

		if (e->written >= plan->write_budget)
		{
			e->hit_maxpages = true;
			break;
		}

		/* (neighbours written along count against the budget too) */
		outcome = cleaner_sync_buffer(next_to_clean, &wb_context, false,
									  Min(bgw_jit_combine_limit,
										  plan->write_budget - e->written),
									  &combined);
		count_judgements(e, outcome);
		if (++next_to_clean >= NBuffers)
			next_to_clean = 0;
		num_to_scan--;

		if (outcome & CLEANER_REUSABLE)
			reusable_buffers++;
		if (outcome & CLEANER_WRITTEN)
			e->written += 1 + take_combined(e, &combined);

		/* A long scan must still answer DROP DATABASE's barrier promptly. */
		if ((num_to_scan & 1023) == 0)
		{
			CHECK_FOR_INTERRUPTS();
			if (ShutdownRequestPending)
				break;
		}
	}

	e->scanned = scan_limit - num_to_scan;
	clean_position += e->scanned;
	e->reusable_found = reusable_buffers - est.reusable_buffers_est;
	jit_refine_density(&jit_state, &params, e->scanned, e->reusable_found);
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
		CleanerCombined combined = {0};
		int			outcome = cleaner_sync_buffer(all_next_to_clean, &wb_context,
												  true,
												  Min(bgw_jit_combine_limit,
													  bgw_jit_all_maxpages - e->all_written),
												  &combined);

		count_judgements(e, outcome);
		if (outcome & CLEANER_WRITTEN)
			e->all_written += 1 + take_combined(e, &combined);
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
	s->margin = e->margin;
	s->hand_rate = e->hand_rate;
	s->lead_target = e->lead_target;
	s->sleep_ms = result->hibernate ? -1 : e->sleep_ms;
	s->cpu_priority = applied_cpu_priority;
	if (result->cleaned)
	{
		s->next_to_clean = (int) (clean_position % NBuffers);
		s->bufs_ahead = e->bufs_ahead;
		s->smoothed_alloc = e->smoothed_alloc;
		s->smoothed_density = e->smoothed_density;
		s->upcoming_alloc_est = e->upcoming_alloc_est;
	}

	/* pg_stat_bgwriter's periods are not ours: fold even if reset */
	fold_bgwriter_share(s, result, backend_writes);
	if (s->reset_generation == result->generation)
		fold_cycle(s, result, backend_writes);

	LWLockRelease(s->lock);
}

/*
 * Add a cycle to the worker's share of pg_stat_bgwriter (for the
 * bgw_jit_bgwriter view); caller holds the lock.
 *
 * A new pg_stat_bgwriter.stats_reset starts a new period: the totals as
 * they are before this cycle are its starting point.  The stats_reset was
 * read at the start of the cycle, before any write, so a cycle's writes
 * count in the period it saw (writes of the cycle during which the reset
 * happened count in the period before, and are lost with it).
 *
 * 15: pg_stat_bgwriter.buffers_backend includes our writes.  It rises
 * when the checkpointer absorbs the backends' write counts and reports
 * them, and then includes all our writes made before this cycle began
 * (more exactly: before the absorption; those between it and this cycle
 * are counted too early, and corrected at the next rise).  So each time
 * buffers_backend changes, our total as of the start of the cycle is what
 * it has absorbed.  At a new period buffers_backend restarted from 0; a
 * value above 0 already is a rise.  Our writes not yet absorbed at the
 * reset are counted in the new period when they are, as core counts any
 * backend's pending writes.
 */
static void
fold_bgwriter_share(BgwJitShared *s, CycleResult *result,
					uint64 backend_writes)
{
	BgwJitBgwriterShare *b = &s->bgwriter;
	BgwJitCycle *e = &result->entry;

	if (b->period_reset != result->bgwriter_reset)
	{
		b->period_reset = result->bgwriter_reset;
		b->period_written = b->written;
		b->period_maxwritten = b->maxwritten;
		b->period_absorbed = b->absorbed;
		b->backend_seen = 0;
	}
	if (COMPAT_BACKEND_WRITES_INCLUDE_OWN && backend_writes != b->backend_seen)
	{
		b->absorbed = b->written;
		b->backend_seen = backend_writes;
	}

	if (!result->cleaned)
		return;
	b->written += e->written + e->all_written;
	b->maxwritten += e->hit_maxpages ? 1 : 0;
}

/* Add a cycle to the counters and the history ring; caller holds the lock. */
static void
fold_cycle(BgwJitShared *s, CycleResult *result, uint64 backend_writes)
{
	BgwJitCycle *e = &result->entry;

	s->counters.buf_alloc += e->recent_alloc;
	s->counters.hibernations += (result->hibernate && !was_hibernating) ? 1 : 0;
	was_hibernating = result->hibernate;

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
	s->counters.buf_combined += e->combined;
	s->counters.buf_clean_evicted += e->evicted;
	s->counters.buf_clean_redirtied += e->redirtied;
	s->counters.maxwritten_clean += e->hit_maxpages ? 1 : 0;
	s->counters.laps += e->lapped ? 1 : 0;
	s->counters.buffers_overrun += e->overrun;
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
