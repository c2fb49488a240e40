/*-------------------------------------------------------------------------
 *
 * bgw_jit.c
 *		Module set-up: settings, shared memory and worker registration.
 *
 * bgw_jit moves the background writer's "just-in-time" LRU cleaning into
 * a tunable, observable background worker.  This file holds what runs in
 * the postmaster; worker.c has the worker, cleaner.c the buffer writes,
 * estimator.c the arithmetic and stats.c the SQL-callable functions.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "bgw_jit.h"
#include "compat.h"
#include "estimator.h"

BGW_JIT_MODULE_MAGIC;

bool		bgw_jit_enabled = true;
int			bgw_jit_delay = 200;
int			bgw_jit_lru_maxpages = 100;
double		bgw_jit_lru_multiplier = 2.0;
int			bgw_jit_smoothing_samples = 16;
int			bgw_jit_scan_whole_pool_seconds = 120;
int			bgw_jit_history_size = 1024;
int			bgw_jit_strategy = BGW_JIT_STRATEGY_JIT;
double		bgw_jit_lru_percent = 10.0;
double		bgw_jit_all_percent = 0.333;
int			bgw_jit_all_maxpages = 5;
int			bgw_jit_flush_after = -1;
#ifdef BGW_JIT_FAULT_INJECTION
bool		bgw_jit_inject_error = false;
#endif

BgwJitShared *bgw_jit_shared = NULL;
uint32	   *bgw_jit_clean_marks = NULL;

static const struct config_enum_entry strategy_options[] = {
	{"jit", BGW_JIT_STRATEGY_JIT, false},
	{"lap", BGW_JIT_STRATEGY_LAP, false},
	{"jit+all", BGW_JIT_STRATEGY_JIT_ALL, false},
	{NULL, 0, false}
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void bgw_jit_shmem_request(void);
static void bgw_jit_shmem_startup(void);
static Size bgw_jit_shmem_size(void);
static void define_settings(void);
static void register_worker(void);

void
_PG_init(void)
{
	/*
	 * Shared memory and the worker can only be set up in the postmaster.
	 * Loaded any other way (CREATE EXTENSION without preloading), the SQL
	 * functions report that the library was not preloaded.
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;

	define_settings();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = bgw_jit_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = bgw_jit_shmem_startup;

	register_worker();
}

static void
define_settings(void)
{
	DefineCustomBoolVariable("bgw_jit.enabled",
							 "Whether the bgw_jit worker cleans buffers.",
							 "When off, the worker only keeps counting allocations.",
							 &bgw_jit_enabled,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.delay",
							"Sleep time between cleaning cycles.",
							"A shorter delay needs a higher bgw_jit.lru_multiplier.",
							&bgw_jit_delay,
							200, 10, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.lru_maxpages",
							"Maximum number of buffers written per cleaning cycle.",
							"0 disables cleaning.",
							&bgw_jit_lru_maxpages,
							100, 0, INT_MAX / 2,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomRealVariable("bgw_jit.lru_multiplier",
							 "Multiple of the recent buffer allocation rate to clean ahead of the clock sweep.",
							 NULL,
							 &bgw_jit_lru_multiplier,
							 2.0, 0.0, 10.0,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.smoothing_samples",
							"Number of cycles the allocation and density averages span.",
							"1 disables smoothing.",
							&bgw_jit_smoothing_samples,
							16, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.scan_whole_pool_seconds",
							"Time within which the cleaner visits the whole buffer pool even when idle.",
							NULL,
							&bgw_jit_scan_whole_pool_seconds,
							120, 1, 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("bgw_jit.strategy",
							 "Cleaning strategy: jit, lap or jit+all.",
							 "jit cleans as many buffers ahead of the clock sweep as it estimates backends will need; lap scans a fixed share of the pool per cycle right behind the clock sweep; jit+all adds a scan that writes dirty buffers whatever their usage count, to spread out checkpoint writes.",
							 &bgw_jit_strategy,
							 BGW_JIT_STRATEGY_JIT,
							 strategy_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("bgw_jit.lru_percent",
							 "Percentage of the buffer pool the lap strategy scans per cycle.",
							 NULL,
							 &bgw_jit_lru_percent,
							 10.0, 0.0, 100.0,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("bgw_jit.all_percent",
							 "Percentage of the buffer pool the jit+all strategy's all-buffers scan visits per cycle.",
							 NULL,
							 &bgw_jit_all_percent,
							 0.333, 0.0, 100.0,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.all_maxpages",
							"Maximum number of buffers the all-buffers scan writes per cycle.",
							NULL,
							&bgw_jit_all_maxpages,
							5, 0, INT_MAX / 2,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.flush_after",
							"Number of pages the worker writes before asking the kernel to write them back.",
							"-1 uses bgwriter_flush_after; 0 disables forced writeback.",
							&bgw_jit_flush_after,
							-1, -1, WRITEBACK_MAX_PENDING_FLUSHES,
							PGC_SIGHUP,
							GUC_UNIT_BLOCKS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.history_size",
							"Number of cleaning cycles kept in bgw_jit_history.",
							NULL,
							&bgw_jit_history_size,
							1024, 0, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

#ifdef BGW_JIT_FAULT_INJECTION
	DefineCustomBoolVariable("bgw_jit.inject_error",
							 "Test builds only: the worker raises an ERROR while it holds a buffer pinned and locked.",
							 NULL,
							 &bgw_jit_inject_error,
							 false,
							 PGC_SIGHUP,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
#endif

	MarkGUCPrefixReserved("bgw_jit");
}

static void
register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_JIT_RESTART_SECONDS;
	strlcpy(worker.bgw_library_name, "bgw_jit", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "bgw_jit_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "bgw_jit cleaner", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "bgw_jit", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

static Size
bgw_jit_shmem_size(void)
{
	return add_size(offsetof(BgwJitShared, history),
					mul_size(bgw_jit_history_size, sizeof(BgwJitCycle)));
}

static void
bgw_jit_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(bgw_jit_shmem_size());
	RequestAddinShmemSpace(mul_size(NBuffers, sizeof(uint32)));
	RequestNamedLWLockTranche("bgw_jit", 1);
}

static void
bgw_jit_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bgw_jit_shared = ShmemInitStruct("bgw_jit", bgw_jit_shmem_size(), &found);
	if (!found)
	{
		memset(bgw_jit_shared, 0, bgw_jit_shmem_size());
		bgw_jit_shared->lock = &(GetNamedLWLockTranche("bgw_jit"))->lock;
		bgw_jit_shared->history_size = bgw_jit_history_size;
		bgw_jit_shared->smoothed_density = JIT_INITIAL_DENSITY;
		bgw_jit_shared->stats_reset = GetCurrentTimestamp();
		bgw_jit_stats_load(bgw_jit_shared);
	}
	bgw_jit_clean_marks = ShmemInitStruct("bgw_jit clean marks",
										  mul_size(NBuffers, sizeof(uint32)),
										  &found);
	if (!found)
		memset(bgw_jit_clean_marks, 0, mul_size(NBuffers, sizeof(uint32)));
	LWLockRelease(AddinShmemInitLock);

	/* The postmaster saves the statistics when it exits cleanly. */
	if (!IsUnderPostmaster)
		on_shmem_exit(bgw_jit_stats_save, (Datum) 0);
}

const char *
bgw_jit_strategy_name(int strategy)
{
	for (const struct config_enum_entry *e = strategy_options; e->name; e++)
		if (e->val == strategy)
			return e->name;
	return "unknown";
}

/*
 * Error out unless the library was preloaded: without its shared memory
 * there is nothing to report.
 */
void
bgw_jit_check_loaded(void)
{
	if (bgw_jit_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("bgw_jit must be loaded via shared_preload_libraries"),
				 errhint("Add bgw_jit to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * Copy up to 'max' cycles of the history ring into 'out', oldest first,
 * starting at the cycle with ring index *next (the number of cycles
 * recorded before it) and stopping before index 'end'.  Cycles already
 * overwritten are skipped.  Advances *next past what was copied and
 * returns how many were.  The caller holds the lock, or is the postmaster
 * alone at exit; it copies in bounded chunks so that the lock is never
 * held for long.
 */
int
bgw_jit_history_read(BgwJitShared *s, uint64 *next, uint64 end,
					 BgwJitCycle *out, int max)
{
	uint64		oldest;
	int			n = 0;

	if (s->history_size == 0)
		return 0;
	end = Min(end, s->history_count);
	oldest = s->history_count - Min(s->history_count, (uint64) s->history_size);
	if (*next < oldest)
		*next = oldest;
	while (*next < end && n < max)
	{
		out[n++] = s->history[*next % s->history_size];
		(*next)++;
	}
	return n;
}

/*
 * Zero the cumulative counters and the history; caller checked privileges.
 *
 * Everything that needs the worker (a new baseline for buffers_backend,
 * clearing the clean marks) it does at its next cycle, when it sees the
 * new reset generation; a cycle under way now is not counted.  So nothing
 * here reads cumulative statistics, which would disturb the caller's
 * statistics snapshot.
 */
void
bgw_jit_reset_counters(void)
{
	BgwJitShared *s = bgw_jit_shared;

	LWLockAcquire(s->lock, LW_EXCLUSIVE);
	memset(&s->counters, 0, sizeof(s->counters));
	s->reset_generation++;
	s->backend_seen_valid = false;
	s->history_count = 0;
	s->stats_reset = GetCurrentTimestamp();
	LWLockRelease(s->lock);
}
