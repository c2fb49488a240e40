/*-------------------------------------------------------------------------
 *
 * bgw_jit.c
 *		Module set-up: settings, statement hooks and worker registration.
 *
 * bgw_jit moves the background writer's "just-in-time" LRU cleaning into
 * a tunable, observable background worker.  This file holds what runs in
 * the postmaster: the settings, the statement hooks that wake a
 * hibernating worker, and the workers' registration.  The rest, from the
 * top down:
 *
 *	worker.c	the cleaner's loop: cycles, sleeps, errors
 *	pacer.c		how long to sleep and how far ahead to clean
 *	estimator.c	core's estimate of upcoming allocations
 *	scan.c		the scans over the pool and their stop rules
 *	flusher.c	the second worker, flushing WAL for the cleaner
 *	shmem.c		shared memory: published state, counters, history, and
 *				their file across clean restarts
 *	errors.c	recovery from an ERROR, shared by both workers
 *	cleaner.c	writing one buffer, and judging earlier writes
 *	stats.c		the SQL-callable functions (they read shmem.c's state
 *				and run pacer.c's and estimator.c's arithmetic)
 *	compat.c	what differs between server versions (with compat.h)
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "executor/executor.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "bgw_jit.h"
#include "compat.h"
#include "errors.h"
#include "pacer.h"
#include "scan.h"
#include "shmem.h"
#include "writers.h"

BGW_JIT_MODULE_MAGIC;

bool		bgw_jit_enabled = true;
int			bgw_jit_delay = 200;
int			bgw_jit_lru_maxpages = -1;
double		bgw_jit_lru_multiplier = PACER_MARGIN_AUTO;
int			bgw_jit_smoothing_samples = 16;
int			bgw_jit_scan_whole_pool_seconds = 120;
int			bgw_jit_history_size = 1024;
int			bgw_jit_strategy = BGW_JIT_STRATEGY_JIT;
double		bgw_jit_lru_percent = 10.0;
double		bgw_jit_all_percent = 0.333;
int			bgw_jit_all_maxpages = 5;
int			bgw_jit_flush_after = 0;
int			bgw_jit_combine_limit = 1;
int			bgw_jit_pacing = BGW_JIT_PACING_AUTO;
double		bgw_jit_max_write_rate = 0;
int			bgw_jit_cpu_priority = BGW_JIT_CPU_PRIORITY_NORMAL;
int			bgw_jit_max_writers = 1;
static char *bgw_jit_lru_multiplier_string = NULL;
#ifdef BGW_JIT_FAULT_INJECTION
int			bgw_jit_inject_error = BGW_JIT_INJECT_OFF;
int			bgw_jit_error_log_interval = BGW_JIT_ERROR_LOG_INTERVAL_S;
int			bgw_jit_slice_us = SCAN_SLICE_MS * 1000;
int			bgw_jit_writers_min = 1;
#endif


static const struct config_enum_entry strategy_options[] = {
	{"jit", BGW_JIT_STRATEGY_JIT, false},
	{"lap", BGW_JIT_STRATEGY_LAP, false},
	{"jit+all", BGW_JIT_STRATEGY_JIT_ALL, false},
	{NULL, 0, false}
};

#ifdef BGW_JIT_FAULT_INJECTION
static const struct config_enum_entry inject_error_options[] = {
	{"off", BGW_JIT_INJECT_OFF, false},
	{"write", BGW_JIT_INJECT_WRITE, false},
	{"deferred", BGW_JIT_INJECT_DEFERRED, false},
	{"flush", BGW_JIT_INJECT_FLUSH, false},
	{NULL, 0, false}
};
#endif

static const struct config_enum_entry pacing_options[] = {
	{"auto", BGW_JIT_PACING_AUTO, false},
	{"fixed", BGW_JIT_PACING_FIXED, false},
	{NULL, 0, false}
};

/* "idle" is known only to be refused with a reason (check_cpu_priority) */
static const struct config_enum_entry cpu_priority_options[] = {
	{"normal", BGW_JIT_CPU_PRIORITY_NORMAL, false},
	{"low", BGW_JIT_CPU_PRIORITY_LOW, false},
	{"idle", BGW_JIT_CPU_PRIORITY_IDLE, true},
	{NULL, 0, false}
};

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

void		_PG_init(void);
static void define_settings(void);
static bool check_lru_multiplier(char **newval, void **extra, GucSource source);
static bool check_cpu_priority(int *newval, void **extra, GucSource source);
static void assign_lru_multiplier(const char *newval, void *extra);
static void register_one(const char *function, const char *name,
						 const char *type, int arg);
static void register_workers(void);
static void wake_worker_if_hibernating(void);
static void bgw_jit_ExecutorStart(QueryDesc *queryDesc, int eflags);
static void bgw_jit_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
								   bool readOnlyTree,
								   ProcessUtilityContext context,
								   ParamListInfo params,
								   QueryEnvironment *queryEnv,
								   DestReceiver *dest, QueryCompletion *qc);

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

	bgw_jit_shmem_init();
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = bgw_jit_ExecutorStart;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = bgw_jit_ProcessUtility;

	register_workers();
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
							"Longest sleep between cleaning cycles.",
							"With bgw_jit.pacing = fixed, the sleep between cycles.",
							&bgw_jit_delay,
							200, 10, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.lru_maxpages",
							"Maximum number of buffers written per cleaning cycle.",
							"-1 sets no per-cycle limit (bgw_jit.max_write_rate still applies); 0 disables cleaning.",
							&bgw_jit_lru_maxpages,
							-1, -1, INT_MAX / 2,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("bgw_jit.lru_multiplier",
							   "Multiple of the expected buffer demand to clean ahead of the clock sweep.",
							   "A number between 0 and 10, or \"auto\" to let the worker raise it when the clock sweep outruns the cleaner and lower it when the reserve goes unused.",
							   &bgw_jit_lru_multiplier_string,
							   "auto",
							   PGC_SIGHUP,
							   0,
							   check_lru_multiplier, assign_lru_multiplier, NULL);

	DefineCustomEnumVariable("bgw_jit.pacing",
							 "How the worker chooses the sleep between cycles: auto or fixed.",
							 "auto sleeps as long as the clock sweep's speed allows, up to bgw_jit.delay; fixed sleeps bgw_jit.delay, as the built-in writer does.",
							 &bgw_jit_pacing,
							 BGW_JIT_PACING_AUTO,
							 pacing_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("bgw_jit.max_write_rate",
							 "Maximum rate at which the worker writes buffers, in megabytes per second.",
							 "0 sets no limit.",
							 &bgw_jit_max_write_rate,
							 0.0, 0.0, BGW_JIT_MAX_WRITE_RATE_MAX,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("bgw_jit.cpu_priority",
							 "CPU scheduling priority of the worker: normal, or low (nice 10).",
							 "Raising the priority again after lowering it takes effect at the next server restart unless the server may raise priorities.",
							 &bgw_jit_cpu_priority,
							 BGW_JIT_CPU_PRIORITY_NORMAL,
							 cpu_priority_options,
							 PGC_SIGHUP,
							 0,
							 check_cpu_priority, NULL, NULL);

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
							"0 (the default) leaves writeback to the kernel: the worker's pages are scattered, so one hint per page costs more than it saves; -1 uses bgwriter_flush_after.",
							&bgw_jit_flush_after,
							0, -1, WRITEBACK_MAX_PENDING_FLUSHES,
							PGC_SIGHUP,
							GUC_UNIT_BLOCKS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.combine_limit",
							"Largest run of neighbouring pages the worker writes together.",
							"When it writes a page, the worker also writes the dirty, unused pages next to it in the same relation fork that are in shared buffers, up to this many pages in all; 1 writes single pages.",
							&bgw_jit_combine_limit,
							1, 1, 128,
							PGC_SIGHUP,
							GUC_UNIT_BLOCKS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgw_jit.max_writers",
							"Number of writer processes that can take pages from the cleaner.",
							"Started with the server; the cleaner hands them pages only when one writer cannot keep up, by its measure of the demand and of the time a write takes.  Each takes a background worker slot (max_worker_processes).",
							&bgw_jit_max_writers,
							1, 0, BGW_JIT_WRITERS_MAX,
							PGC_POSTMASTER,
							0,
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
	DefineCustomEnumVariable("bgw_jit.inject_error",
							 "Test builds only: the cleaner raises an ERROR when it writes a page (write) or retries one it put off (deferred); the WAL flusher when it flushes (flush).",
							 NULL,
							 &bgw_jit_inject_error,
							 BGW_JIT_INJECT_OFF,
							 inject_error_options,
							 PGC_SIGHUP,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("bgw_jit.error_log_interval",
							"Test builds only: how often the workers log the same error.",
							NULL,
							&bgw_jit_error_log_interval,
							BGW_JIT_ERROR_LOG_INTERVAL_S, 1, 3600,
							PGC_SIGHUP,
							GUC_NOT_IN_SAMPLE | GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("bgw_jit.slice_us",
							"Test builds only: the cleaner's time slice, in microseconds of CPU.",
							NULL,
							&bgw_jit_slice_us,
							SCAN_SLICE_MS * 1000, 10, 1000000,
							PGC_SIGHUP,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("bgw_jit.writers_min",
							"Test builds only: at least this many processes write the LRU scan's pages, the cleaner included.",
							NULL,
							&bgw_jit_writers_min,
							1, 1, BGW_JIT_WRITERS_MAX + 1,
							PGC_SIGHUP,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
#endif

	MarkGUCPrefixReserved("bgw_jit");
}

/* A worker of this library, from postmaster start, restarted on a crash. */
static void
register_one(const char *function, const char *name, const char *type,
			 int arg)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_PostmasterStart;
	worker.bgw_restart_time = BGW_JIT_RESTART_SECONDS;
	strlcpy(worker.bgw_library_name, "bgw_jit", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker.bgw_name, name, BGW_MAXLEN);
	strlcpy(worker.bgw_type, type, BGW_MAXLEN);
	worker.bgw_main_arg = Int32GetDatum(arg);
	RegisterBackgroundWorker(&worker);
}

/*
 * From postmaster start and without a database connection, like core's
 * writer: the cleaning is needed most during crash recovery and on
 * standbys, where the startup process would write its own victims.  The
 * cleaner's WAL flushes (flusher.c) and its writers (writers.c) likewise.
 */
static void
register_workers(void)
{
	register_one("bgw_jit_main", "bgw_jit cleaner", "bgw_jit", 0);
	register_one("bgw_jit_flusher_main", "bgw_jit wal flusher",
				 "bgw_jit wal flusher", 0);
	for (int i = 0; i < bgw_jit_max_writers; i++)
	{
		char		name[BGW_MAXLEN];

		snprintf(name, sizeof(name), "bgw_jit writer %d", i + 1);
		register_one("bgw_jit_writer_main", name, "bgw_jit writer", i);
	}
}


static const char *
enum_name(const struct config_enum_entry *options, int value)
{
	for (const struct config_enum_entry *e = options; e->name; e++)
		if (e->val == value)
			return e->name;
	return "unknown";
}

const char *
bgw_jit_strategy_name(int strategy)
{
	return enum_name(strategy_options, strategy);
}

const char *
bgw_jit_pacing_name(int pacing)
{
	return enum_name(pacing_options, pacing);
}

const char *
bgw_jit_cpu_priority_name(int priority)
{
	return enum_name(cpu_priority_options, priority);
}

/*
 * Parse a bgw_jit.lru_multiplier value: "auto" (PACER_MARGIN_AUTO) or a
 * number in [0, 10].  False if it is neither.
 */
bool
bgw_jit_parse_multiplier(const char *text, double *value)
{
	char	   *end;

	if (pg_strcasecmp(text, "auto") == 0)
	{
		*value = PACER_MARGIN_AUTO;
		return true;
	}
	errno = 0;
	*value = strtod(text, &end);
	while (*end == ' ' || *end == '\t')
		end++;
	return end != text && *end == '\0' && errno == 0 &&
		*value >= 0 && *value <= 10;
}

static bool
check_lru_multiplier(char **newval, void **extra, GucSource source)
{
	double		value;
	double	   *parsed;

	if (!bgw_jit_parse_multiplier(*newval, &value))
	{
		GUC_check_errdetail("%s must be \"auto\" or a number between 0 and 10.",
							"bgw_jit.lru_multiplier");
		return false;
	}

	parsed = compat_guc_malloc(sizeof(double));
	if (parsed == NULL)
		return false;
	*parsed = value;
	*extra = parsed;
	return true;
}

static void
assign_lru_multiplier(const char *newval, void *extra)
{
	bgw_jit_lru_multiplier = *(double *) extra;
}

/*
 * SCHED_IDLE, offered up to 1.3, is refused: on saturated CPUs the worker
 * then runs so seldom that it holds what backends wait for (a buffer's
 * content lock while writing it, WALWriteLock when it flushes WAL itself)
 * for as long as the scheduler keeps it off the CPU (doc/performance.md,
 * "CPU priority").  Nice 10 still gets its share of the CPU.
 */
static bool
check_cpu_priority(int *newval, void **extra, GucSource source)
{
	if (*newval != BGW_JIT_CPU_PRIORITY_IDLE)
		return true;
	GUC_check_errdetail("Under SCHED_IDLE the worker can be kept off the CPU while it holds locks that committing backends wait for.");
	GUC_check_errhint("Use \"low\" (nice 10) to lower the worker's priority.");
	return false;
}

/*
 * Statement starts wake a hibernating worker, standing in for core's
 * StrategyNotifyBgWriter(), whose single slot belongs to the built-in
 * writer.  The common case costs one read of a shared flag.
 */
static void
wake_worker_if_hibernating(void)
{
	BgwJitShared *s = bgw_jit_shared;
	Latch	   *latch;

	if (s != NULL && pg_atomic_read_u32(&s->hibernating) != 0 &&
		pg_atomic_exchange_u32(&s->hibernating, 0) != 0 &&
		(latch = s->worker_latch) != NULL)
		SetLatch(latch);
}

static void
bgw_jit_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	wake_worker_if_hibernating();
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
bgw_jit_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	wake_worker_if_hibernating();
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

