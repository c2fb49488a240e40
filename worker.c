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
 * - SIGTERM ends the worker with exit code 1: the postmaster restarts it
 *   after bgw_restart_time unless the server is shutting down.  SIGINT is
 *   ignored, as there is no statement to cancel.  (Neither
 *   pg_terminate_backend() nor pg_cancel_backend() reaches the worker: it
 *   has no PGPROC in the ProcArray.)
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
#include "portability/instr_time.h"
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
#include "cleaner.h"
#include "compat.h"
#include "errors.h"
#include "estimator.h"
#include "pacer.h"
#include "scan.h"
#include "shmem.h"
#include "writers.h"

PGDLLEXPORT void bgw_jit_main(Datum main_arg);

/*
 * Sleep while hibernating.  Statement starts wake the worker at once; this
 * bounds the reaction to allocations no statement announces (recovery,
 * autovacuum).
 */
#define HIBERNATE_MS	1000

/*
 * Idle cycles must span this long before the worker hibernates; after a
 * statement woke it for nothing, it sleeps HIBERNATE_REARM_MS before it
 * listens to statements again.  Together they bound the wake-ups of a
 * cached read-only load to about four a second.
 */
#define HIBERNATE_AFTER_MS	1000
#define HIBERNATE_REARM_MS	500



/*
 * The cycle under way.  An ERROR in the middle of it (a failed write)
 * still publishes what it did up to there.
 */
static BgwJitCycleResult cycle;
static int64 cycle_cpu_start_us;	/* the thread's CPU time at its start */
static bool cycle_running = false;

/*
 * A cycle whose slice ran out of time is continued by the next run, which
 * takes no new sample (the hand's movement, the allocations and the
 * elapsed time carry over to the next cycle), plans nothing and adds its
 * figures to the cycle's; cycle_head is the cycle's entry as planned.
 */
static bool cycle_open = false;
static bool cycle_overdue = false;	/* it ended with work left: no sleep */
static PacerPlan cycle_plan;
static BgwJitCycle cycle_head;
static int64 cycle_hand_position;	/* the hand when the cycle began */
static int	cycle_evicted = 0;	/* judgements of the cycle's slices */
static int	cycle_redirtied = 0;
static int64 carried_overrun = 0;	/* the hand's run past the frontier
									 * found by later slices, for the next
									 * cycle's plan */

/* State carried between cycles, private to the worker. */
static bool hand_valid = false;
static int	prev_strategy_buf_id;
static uint32 prev_strategy_passes;
/*
 * The hand's position counted in buffers passed since buffer 0 of pass 0,
 * as first read and then advanced by its movement, so that a position mod
 * NBuffers is a buffer id (the scan's frontier is kept in the same unit).
 */
static int64 hand_position;

static PacerState pacer_state;
static AllocTracker alloc_tracker;
static int	flush_after;		/* bgw_jit.flush_after, -1 resolved */

/* Intervals are measured on the monotonic clock: the wall clock can step. */
static instr_time prev_cycle_start;
static bool prev_cycle_valid = false;
static bool idle_valid = false; /* idle_since is set */
static instr_time idle_since;	/* first of the current idle cycles */
static bool timed_out = true;	/* the last sleep ended by its timeout */
static bool pacer_restarted = false;	/* since the last cycle */

/*
 * How many processes write the LRU scan's pages (writers.c): by Little's
 * law, the writes in flight needed are the demand (pages a second that
 * someone must write: the cleaner's and its writers' writes and the
 * backends' own) times the time a write takes the cleaner (the wall time
 * of its scan per page it wrote itself, waits for the device and for a
 * CPU included); more than one process writes when that exceeds
 * WRITERS_UTILIZATION of one.  Both are smoothed, as samples of a few
 * pages say little: the write time over the slices that wrote at least
 * WRITE_TIME_MIN_PAGES, the demand over intervals of DEMAND_SAMPLE_MS
 * whatever the cycles (where writes cost, one cycle can run for seconds).
 */
#define WRITERS_UTILIZATION		0.7
#define WRITE_TIME_MIN_PAGES	16
#define DEMAND_SAMPLE_MS		500
#define WRITERS_SMOOTHING		0.25

static double write_wall_us = 0;	/* per page the cleaner wrote */
static double demand_per_s = 0;	/* pages a second to be written */
static uint64 served_since_sample = 0;	/* pages written on our behalf */
static uint64 backend_writes_seen = 0;
static bool demand_valid = false;	/* demand_sampled_at is set */
static instr_time demand_sampled_at;
static WritersDone writers_seen;	/* the writers' totals last folded */

/*
 * bgw_jit.cpu_priority as last asked for, and as in force: a change the
 * system refused is not retried until the setting changes again.
 */
static int	requested_cpu_priority = BGW_JIT_CPU_PRIORITY_NORMAL;
static int	applied_cpu_priority = BGW_JIT_CPU_PRIORITY_NORMAL;
static int	base_nice = 0;		/* the nice value the worker started with */


static void set_up_signals(void);
static void warn_if_builtin_cleaner(void);
static void apply_cpu_priority(void);
static void recover_from_error(MemoryContext cycle_context);
static void pacer_params(PacerParams *params);
static int	writers_wanted(void);
static void note_demand(uint64 backend_writes);
static void fold_writers(BgwJitCycle *e);
static uint64 writers_reported(void);
static void run_cycle(void);
static void finish_cycle(bool idle);
static void restart_pacer(void);

/*
 * Signal handlers (bgworker_die(), which would turn SIGTERM into a FATAL
 * in the middle of a write, replaced by a request to leave at the next
 * safe point; SIGINT ignored, as there is no statement to cancel),
 * ProcSignal membership (see bgw_jit_compat_join_procsignal()), then signals
 * unblocked.  The flusher sets up the same for itself.
 *
 * After a SIGTERM both workers exit with code 1.  The sender cannot be
 * told apart portably (the postmaster at a shutdown, an administrator's
 * kill, systemd signalling the whole control group); the postmaster
 * restarts the worker after bgw_restart_time unless the server is
 * shutting down, when it starts no workers, and logs the exit code, as
 * for 15's logical replication launcher.
 */
static void
set_up_signals(void)
{
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, PG_SIG_IGN);
	bgw_jit_compat_join_procsignal();
	BackgroundWorkerUnblockSignals();
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
				(errmsg("the built-in background writer also cleans buffers (%s = %d)",
						"bgwriter_lru_maxpages", bgwriter_lru_maxpages),
				 errhint("Set %s = 0 so that only bgw_jit cleans.",
						 "bgwriter_lru_maxpages")));
}

/*
 * bgw_jit.cpu_priority: nice 10 (or the server's own nice value, if that
 * is lower still) for low, the server's nice value for normal.  Lowering
 * always works; raising it again needs CAP_SYS_NICE (or RLIMIT_NICE), so
 * without it the worker stays where it is until it restarts.
 */
static void
apply_cpu_priority(void)
{
	int			wanted = bgw_jit_cpu_priority;

	if (wanted == requested_cpu_priority)
		return;
	requested_cpu_priority = wanted;

	if (!compat_set_nice((wanted == BGW_JIT_CPU_PRIORITY_LOW) ?
						 Max(base_nice, BGW_JIT_LOW_PRIORITY_NICE) :
						 base_nice))
	{
		ereport(WARNING,
				(errmsg("could not change the CPU priority of the bgw_jit worker to \"%s\": %m",
						bgw_jit_cpu_priority_name(wanted)),
				 errdetail("The worker keeps CPU priority \"%s\".",
						   bgw_jit_cpu_priority_name(applied_cpu_priority)),
				 errhint("Raising the priority again takes effect when the server restarts.")));
		return;
	}
	applied_cpu_priority = wanted;
}


/*
 * After an ERROR in the cleaner: the shared clean-up, then publish what
 * the cycle did, and carry on in this process with the controller's state
 * intact.  Called with the error still current, from the sigsetjmp block.
 */
static void
recover_from_error(MemoryContext cycle_context)
{
	HOLD_INTERRUPTS();
	bgw_jit_error_cleanup("the bgw_jit cleaner");
	MemoryContextReset(cycle_context);
	bgw_jit_scan_reset_writeback(&flush_after);
	RESUME_INTERRUPTS();

	if (cycle_running)
		finish_cycle(false);
	cycle_open = false;

	/* a write error is likely to repeat: not as fast as we can */
	bgw_jit_error_pause();
	compat_smgr_free_all();

	/* the sleep says nothing about the load */
	restart_pacer();
	idle_valid = false;
}

void
bgw_jit_main(Datum main_arg)
{
	sigjmp_buf	local_sigjmp_buf;
	MemoryContext cycle_context;

	set_up_signals();

	/*
	 * No database connection: the worker touches only shared buffers, and
	 * so runs from postmaster start, through crash and archive recovery
	 * and on standbys, as core's writer does.  A resource owner it needs:
	 * without one the first pin would crash.
	 */
	CreateAuxProcessResourceOwner();

	/*
	 * Read pgstat's shared counters afresh on every call instead of building
	 * a snapshot (which in "snapshot" mode would copy every table's stats).
	 */
	SetConfigOption("stats_fetch_consistency", "none",
					PGC_SUSET, PGC_S_OVERRIDE);

	cycle_context = AllocSetContextCreate(TopMemoryContext,
										  "bgw_jit cycle",
										  ALLOCSET_DEFAULT_SIZES);

	{
		PacerParams params;

		pacer_params(&params);
		bgw_jit_pacer_init(&pacer_state, &params);
	}
	bgw_jit_alloc_tracker_init(&alloc_tracker);
	/* (the writers' counts since the server started are not this worker's) */
	bgw_jit_writers_done(&writers_seen);
	flush_after = 0;
	bgw_jit_scan_init(&flush_after);
	bgw_jit_shared->worker_latch = MyLatch;
	bgw_jit_shared->worker_pid = MyProcPid;
	before_shmem_exit(bgw_jit_clear_worker_pid, (Datum) 0);

	ereport(LOG, (errmsg("bgw_jit worker started")));
	warn_if_builtin_cleaner();
	errno = 0;
	base_nice = compat_get_nice();
	if (errno != 0)
		base_nice = 0;
	apply_cpu_priority();

	/*
	 * The startup process restores the cumulative statistics (after a
	 * crash: resets them) first thing; until then they read as zeros,
	 * pg_stat_bgwriter.stats_reset included.  Read none of them before, or
	 * the restored counts would look like a burst of allocations and a new
	 * statistics period.
	 */
	while (compat_bgwriter_stats_reset() == 0 && !ShutdownRequestPending)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/*
	 * An ERROR comes back here, as in core's writer: the worker stays, and
	 * so do its estimates and its pace.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		recover_from_error(cycle_context);
	PG_exception_stack = &local_sigjmp_buf;

	while (!ShutdownRequestPending)
	{
		bool		armed;
		int			rc;
		int			sleep_ms;

		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			warn_if_builtin_cleaner();
			apply_cpu_priority();
			/* new settings, new plan */
			cycle_open = false;
		}

		/* Don't keep files of dropped relations open across checkpoints. */
		if (FirstCallSinceLastCheckpoint())
			compat_smgr_free_all();

		flush_after = (bgw_jit_flush_after >= 0) ? bgw_jit_flush_after :
			bgwriter_flush_after;

		MemoryContextSwitchTo(cycle_context);
		run_cycle();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(cycle_context);

		/*
		 * Our writes' WAL flushes (and, on 16+, I/O statistics) would
		 * otherwise reach pgstat only when we exit; once a second.
		 */
		bgw_jit_compat_report_stat(writers_reported);

		/*
		 * A hibernating worker asks the next statement start to set its
		 * latch (bgw_jit.c's hooks), so that a load arriving during the long
		 * sleep is met at once.  A statement that allocated nothing (the
		 * cycle it woke found the pool idle still) was a false alarm: the
		 * worker then listens to statements again only after
		 * HIBERNATE_REARM_MS, so that a cached read-only load wakes it a few
		 * times a second, not once per statement.
		 */
		armed = false;
		sleep_ms = cycle_overdue ? SCAN_SLICE_SLEEP_MS : cycle.entry.sleep_ms;
		if (cycle.hibernate && !timed_out)
			sleep_ms = HIBERNATE_REARM_MS;
		else if (cycle.hibernate)
		{
			armed = true;
			sleep_ms = Max(HIBERNATE_MS, bgw_jit_delay);
		}
		if (armed)
			pg_atomic_write_u32(&bgw_jit_shared->hibernating, 1);
		rc = WaitLatch(MyLatch,
					   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   sleep_ms, PG_WAIT_EXTENSION);
		if (armed)
			pg_atomic_write_u32(&bgw_jit_shared->hibernating, 0);
		ResetLatch(MyLatch);

		/*
		 * After a wake-up, probe the load before trusting an idle rate; after
		 * a hibernating sleep, judge no surprise against the planned one.
		 */
		timed_out = (rc & WL_TIMEOUT) != 0;
		if ((!timed_out && !cycle_open) || cycle.hibernate)
			restart_pacer();
	}

	proc_exit(1);				/* see set_up_signals() */
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
 * One run: a new cycle, which reads the clock hand and the allocations,
 * lets the controller plan and cleans ahead of the hand if enabled; or a
 * later slice of the cycle whose slice ran out of time, which cleans on
 * with that cycle's estimate and plan.  Publishes the outcome.  Works on
 * the file-level 'cycle'.
 */
static void
run_cycle(void)
{
	BgwJitCycleResult *result = &cycle;
	BgwJitCycle *e = &result->entry;
	instr_time	start;
	int			strategy_buf_id;
	uint32		strategy_passes;
	int64		strategy_delta = 0;
	uint32		recent_alloc = 0;
	PacerParams params;
	PacerInput	in;
	PacerPlan	plan;
	ScanLimit	limit;
	bool		idle;
	bool		lru_scan;		/* the LRU scan runs this cycle */
	bool		continues = cycle_open;
	int64		carried = 0;
	instr_time	scan_start;

	memset(result, 0, sizeof(*result));
	cycle_cpu_start_us = bgw_jit_scan_thread_cpu_us();
	cycle_open = false;
	cycle_overdue = false;

	/*
	 * A reset since the marks were last cleared: they judge writes of the
	 * period that was reset, forget them, and begin a new cycle.  Read the
	 * generation before the cycle's start time, so that every cycle
	 * counted after a reset began after stats_reset.
	 */
	LWLockAcquire(bgw_jit_shared->lock, LW_SHARED);
	result->generation = bgw_jit_shared->reset_generation;
	result->cleared_marks =
		(bgw_jit_shared->marks_generation != result->generation);
	LWLockRelease(bgw_jit_shared->lock);
	if (result->cleared_marks)
	{
		bgw_jit_cleaner_clear_marks();
		continues = false;
	}

	/* Read the hand only: passing an alloc pointer would reset the counter. */
	strategy_buf_id = StrategySyncStart(&strategy_passes, NULL);
	if (hand_valid)
		hand_position += (strategy_buf_id - prev_strategy_buf_id) +
			(int64) (int32) (strategy_passes - prev_strategy_passes) * NBuffers;
	else
		hand_position = (int64) strategy_passes * NBuffers + strategy_buf_id;
	prev_strategy_buf_id = strategy_buf_id;
	prev_strategy_passes = strategy_passes;

	/* a load arriving under an idle cycle's plan needs a plan of its own */
	if (continues && cycle_head.strategy_delta == 0 &&
		cycle_head.recent_alloc == 0 && hand_position != cycle_hand_position)
		continues = false;
	result->continues = continues;

	/*
	 * pg_stat_bgwriter's period, read before buffers_backend and before any
	 * write: what the cycle reads and writes is of this period or later.
	 */
	result->bgwriter_reset = compat_bgwriter_stats_reset();
	/* the first reading after a reset is the new baseline */
	result->backend_writes = bgw_jit_compat_backend_writes(result->cleared_marks,
														   writers_reported,
														   &result->backend_read_at);
	result->strategy_buf_id = strategy_buf_id;
	note_demand(result->backend_writes);
	lru_scan = (bgw_jit_enabled && bgw_jit_lru_maxpages != 0);
	pacer_params(&params);

	if (continues)
	{
		/* the cycle's entry as planned, for this slice's figures */
		*e = cycle_head;
		e->elapsed_us = 0;
		e->strategy_delta = 0;
		e->recent_alloc = 0;
		e->alloc_reported = 0;
		e->woken = false;
		e->restarted = false;
		plan = cycle_plan;
		e->sleep_ms = plan.sleep_ms;
		cycle_running = true;
		/* (a load arriving would have begun a new cycle, above) */
		idle = (cycle_head.recent_alloc == 0 && cycle_head.strategy_delta == 0);
		bgw_jit_scan_limit_start(&limit, bgw_jit_pacer_budget_left(&pacer_state), true);
	}
	else
	{
		/* the wall clock for the views, the monotonic one for the interval */
		e->at = GetCurrentTimestamp();
		INSTR_TIME_SET_CURRENT(start);
		e->elapsed_us = prev_cycle_valid ?
			(int64) (bgw_jit_ms_since(prev_cycle_start) * 1000.0) : 0;
		prev_cycle_start = start;
		prev_cycle_valid = true;
		e->woken = !timed_out;
		e->restarted = pacer_restarted;
		pacer_restarted = false;

		if (hand_valid)
			strategy_delta = hand_position - cycle_hand_position;
		cycle_hand_position = hand_position;
		hand_valid = true;

		recent_alloc = bgw_jit_alloc_tracker_step(&alloc_tracker,
												  compat_shared_buf_alloc(),
												  (uint64) hand_position,
												  &e->alloc_reported);
		e->strategy = bgw_jit_strategy;
		e->recent_alloc = recent_alloc;
		e->strategy_delta = strategy_delta;

		in.elapsed_us = e->elapsed_us;
		in.hand_moved = strategy_delta;
		in.evicted = cycle_evicted;
		in.redirtied = cycle_redirtied;
		/* the LRU scan, if it runs, finds the same overrun */
		carried = lru_scan ? carried_overrun : 0;
		carried_overrun = 0;
		in.overrun = lru_scan ? bgw_jit_scan_overrun(hand_position) + carried : 0;
		in.alloc = recent_alloc;
		in.backend_known = COMPAT_BACKEND_WRITES_ARE_EVICTIONS;
		in.backend_writes = result->backend_writes;
		bgw_jit_pacer_plan(&pacer_state, &params, &in, &plan);
		cycle_evicted = 0;
		cycle_redirtied = 0;
		e->surprise = plan.surprise;
		e->misses = plan.misses;
		e->write_rate = plan.write_rate;
		e->backend_writes = in.backend_known ? (int64) in.backend_writes : -1;
		e->margin = plan.margin;
		e->hand_rate = pacer_state.hand_rate;
		e->lead_target = plan.lead_target;
		e->sleep_ms = plan.sleep_ms;
		cycle_plan = plan;
		cycle_head = *e;

		/* from here on an ERROR still publishes the cycle */
		cycle_running = true;
		idle = (recent_alloc == 0 && strategy_delta == 0);
		bgw_jit_scan_limit_start(&limit, plan.rate_pages, false);
	}

	if (lru_scan)
	{
		ScanRequest req;

		req.hand_position = hand_position;
		req.strategy_delta = continues ? cycle_head.strategy_delta :
			strategy_delta;
		req.recent_alloc = continues ? cycle_head.recent_alloc : recent_alloc;
		req.plan = &plan;
		req.writers = writers_wanted();
		result->cleaned = true;
		INSTR_TIME_SET_CURRENT(scan_start);
		bgw_jit_scan_lru(&req, &limit, e);
		if (e->written >= WRITE_TIME_MIN_PAGES)
		{
			double		sample = bgw_jit_ms_since(scan_start) * 1000.0 /
				e->written;

			write_wall_us = (write_wall_us == 0) ? sample :
				write_wall_us + WRITERS_SMOOTHING * (sample - write_wall_us);
		}
		/* idle only once the cleaner is a whole lap ahead */
		idle &= (e->bufs_ahead + e->scanned >= NBuffers);

		/*
		 * The cycle's row records the overrun its plan judged; what a later
		 * slice finds goes to the next cycle's plan, and row.
		 */
		e->overrun += carried;
		if (continues)
		{
			carried_overrun += e->overrun;
			e->overrun = 0;
		}
	}
	else
		bgw_jit_scan_forget_frontier();

	if (bgw_jit_enabled && bgw_jit_strategy == BGW_JIT_STRATEGY_JIT_ALL &&
		bgw_jit_all_maxpages > 0 && bgw_jit_all_percent > 0)
	{
		result->cleaned = true;
		bgw_jit_scan_all(&limit, e);
	}

	/*
	 * The slice ended with work left: the cycle goes on after a short sleep.
	 * But a self-paced cycle that has run as long as the sleep it planned
	 * is over, and the next one plans after the same short sleep: where
	 * writes cost a device round trip a scan can go on over its slices for
	 * seconds, under an estimate, a write budget and a demand taken before
	 * the load rose.  (The next sample is then no shorter than a cycle's
	 * usual one.)  Fixed pacing keeps core's one cycle per sleep.
	 */
	if (limit.out_of_time)
	{
		idle = false;
		if (params.self_paced &&
			bgw_jit_ms_since(prev_cycle_start) >= plan.sleep_ms)
			cycle_overdue = true;
		else
		{
			e->sliced = true;
			e->sleep_ms = SCAN_SLICE_SLEEP_MS;
		}
	}

	finish_cycle(idle);
}

/*
 * The end of a cycle, also of one an ERROR cut short (never idle): charge
 * its writes, decide whether to hibernate, publish it.
 */
static void
finish_cycle(bool idle)
{
	BgwJitCycleResult *result = &cycle;
	BgwJitCycle *e = &result->entry;
	PacerParams params;
	int			charged;

	cycle_running = false;

	if (!idle)
		idle_valid = false;
	else if (!idle_valid)
	{
		INSTR_TIME_SET_CURRENT(idle_since);
		idle_valid = true;
	}
	result->hibernate = idle && bgw_jit_ms_since(idle_since) >= HIBERNATE_AFTER_MS;

	/* pages handed to the writers are charged now, their writes counted */
	charged = e->written + e->all_written + bgw_jit_scan_handed();
	fold_writers(e);
	served_since_sample += e->written + e->all_written;
	pacer_params(&params);
	bgw_jit_pacer_charge(&pacer_state, &params, charged);
	cycle_evicted += e->evicted;
	cycle_redirtied += e->redirtied;

	/* the cycle goes on in another slice, or it is over */
	cycle_open = e->sliced;
	if (!cycle_open)
		bgw_jit_scan_end_cycle();

	e->smoothed_alloc = bgw_jit_scan_estimates()->smoothed_alloc;
	e->smoothed_density = bgw_jit_scan_estimates()->smoothed_density;
	e->cpu_us = bgw_jit_scan_thread_cpu_us() - cycle_cpu_start_us;
	result->next_to_clean = bgw_jit_scan_next_to_clean();
	result->cpu_priority = applied_cpu_priority;
	bgw_jit_publish_cycle(result);
}

/* Restart the controller (bgw_jit_pacer_restart()), noting it for the history. */
static void
restart_pacer(void)
{
	bgw_jit_pacer_restart(&pacer_state);
	pacer_restarted = true;
}

/*
 * How many processes should write the LRU scan's pages this cycle: 1 (the
 * cleaner alone), or more, by Little's law (above), at most the writers
 * that run plus the cleaner.
 */
static int
writers_wanted(void)
{
	int			wanted;

	wanted = (int) ceil(demand_per_s * write_wall_us / 1e6 /
						WRITERS_UTILIZATION);
#ifdef BGW_JIT_FAULT_INJECTION
	wanted = Max(wanted, bgw_jit_writers_min);
#endif
	return Max(1, Min(wanted, 1 + bgw_jit_writers_running()));
}

/*
 * A sample of the demand, at most every DEMAND_SAMPLE_MS: what was written
 * on the cleaner's behalf since the last, and by the backends (their count
 * as bgw_jit_compat_backend_writes() reads it), over the interval.
 */
static void
note_demand(uint64 backend_writes)
{
	double		ms;
	double		sample;
	uint64		backend = 0;

	if (!demand_valid)
	{
		INSTR_TIME_SET_CURRENT(demand_sampled_at);
		demand_valid = true;
		backend_writes_seen = backend_writes;
		served_since_sample = 0;
		return;
	}
	ms = bgw_jit_ms_since(demand_sampled_at);
	if (ms < DEMAND_SAMPLE_MS)
		return;
	if (backend_writes > backend_writes_seen)
		backend = backend_writes - backend_writes_seen;
	backend_writes_seen = backend_writes;
	INSTR_TIME_SET_CURRENT(demand_sampled_at);
	sample = (served_since_sample + backend) * 1000.0 / ms;
	served_since_sample = 0;
	demand_per_s += WRITERS_SMOOTHING * (sample - demand_per_s);
}

/*
 * Add what the writers did since the last cycle to this one: their writes
 * are charged to the write budget and counted as the cleaner's.
 */
static void
fold_writers(BgwJitCycle *e)
{
	WritersDone now;

	bgw_jit_writers_done(&now);
	e->written += (int) (now.written - writers_seen.written);
	e->evicted += (int) (now.evicted - writers_seen.evicted);
	e->redirtied += (int) (now.redirtied - writers_seen.redirtied);
	writers_seen = now;
}

/* The writers' writes that have reached pg_stat_io (for compat.c). */
static uint64
writers_reported(void)
{
	WritersDone done;

	bgw_jit_writers_done(&done);
	return done.reported;
}
