/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		bgw_jit's shared memory: set-up, the fold of each cycle into the
 *		cumulative counters and the history ring, and what the SQL
 *		functions read of them.
 *
 * The worker publishes every cycle under the lock; readers (stats.c, and
 * the postmaster saving them at exit) copy what they need under it in
 * bounded chunks.
 *
 * Like pg_stat_statements, the counters and the history survive a clean
 * restart: the postmaster writes them to pg_stat/bgw_jit.stat when it
 * exits after a clean shutdown, and reads and removes the file when it
 * creates shared memory.  After a crash or an immediate shutdown nothing
 * is written, so the statistics start from zero, as core's do.  A file
 * that is not ours, of another format version, or that fails its CRC is
 * ignored with a LOG message, never trusted.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "bgw_jit.h"
#include "cleaner.h"
#include "compat.h"
#include "estimator.h"
#include "shmem.h"
#include "writers.h"

#define STATS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/bgw_jit.stat"
#define STATS_MAGIC		0x54494A42	/* "BJIT" */
#define STATS_VERSION	5			/* bump when anything saved changes */

typedef struct StatsFileHeader
{
	uint32		magic;
	uint32		version;
	uint32		body_size;		/* sizeof(StatsFileBody) when written */
	uint32		cycle_size;		/* sizeof(BgwJitCycle) when written */
	uint32		ncycles;		/* history entries that follow, oldest first */
	pg_crc32c	crc;			/* over the body and the entries */
} StatsFileHeader;

typedef struct StatsFileBody
{
	BgwJitCounters counters;
	TimestampTz stats_reset;
	bool		backend_seen_valid;
	uint64		backend_seen;
	BgwJitBgwriterShare bgwriter;
} StatsFileBody;

/* History cycles handled at a time, so that no copy of the ring is needed. */
#define CYCLE_CHUNK		256

BgwJitShared *bgw_jit_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* the last cycle published hibernated (for the hibernations counter) */
static bool was_hibernating = false;

static Size shmem_size(void);
static void shmem_request(void);
static void shmem_startup(void);
static uint64 fold_bgwriter_share(BgwJitShared *s, BgwJitCycleResult *result);
static void fold_cycle(BgwJitShared *s, BgwJitCycleResult *result,
					   uint64 own_absorbed);
static void merge_slice(BgwJitCycle *row, const BgwJitCycle *e);
static void stats_save(int code, Datum arg);
static void stats_load(BgwJitShared *s);
static bool clean_shutdown(void);

/* Chain the shared memory hooks; from _PG_init() in the postmaster. */
void
bgw_jit_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

static Size
shmem_size(void)
{
	return add_size(offsetof(BgwJitShared, history),
					mul_size(bgw_jit_history_size, sizeof(BgwJitCycle)));
}

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(shmem_size());
	RequestAddinShmemSpace(bgw_jit_cleaner_shmem_size());
	RequestAddinShmemSpace(bgw_jit_writers_shmem_size());
	RequestNamedLWLockTranche("bgw_jit", 1);
}

static void
shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bgw_jit_shared = ShmemInitStruct("bgw_jit", shmem_size(), &found);
	if (!found)
	{
		memset(bgw_jit_shared, 0, shmem_size());
		bgw_jit_shared->lock = &(GetNamedLWLockTranche("bgw_jit"))->lock;
		bgw_jit_shared->history_size = bgw_jit_history_size;
		bgw_jit_shared->smoothed_density = JIT_INITIAL_DENSITY;
		bgw_jit_shared->stats_reset = GetCurrentTimestamp();
		pg_atomic_init_u32(&bgw_jit_shared->hibernating, 0);
		pg_atomic_init_u64(&bgw_jit_shared->flush_request, InvalidXLogRecPtr);
		stats_load(bgw_jit_shared);
	}
	bgw_jit_cleaner_shmem_startup();
	bgw_jit_writers_shmem_startup();
	LWLockRelease(AddinShmemInitLock);

	/* The postmaster saves the statistics when it exits cleanly. */
	if (!IsUnderPostmaster)
		on_shmem_exit(stats_save, (Datum) 0);
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
				 errmsg("%s must be loaded via %s", "bgw_jit",
						"shared_preload_libraries"),
				 errhint("Add %s to %s in postgresql.conf and restart the server.",
						 "bgw_jit", "shared_preload_libraries")));
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
	s->backend_read_at = 0;
	s->history_count = 0;
	s->stats_reset = GetCurrentTimestamp();
	LWLockRelease(s->lock);
}

/*
 * The worker's exit callback (before_shmem_exit): no worker runs any more,
 * so bgw_jit_stats.pid becomes NULL until the next one starts.  A plain
 * store, as the worker's start sets it: the callback may run after an
 * ERROR raised while this process held the lock.
 */
void
bgw_jit_clear_worker_pid(int code, Datum arg)
{
	if (bgw_jit_shared != NULL && bgw_jit_shared->worker_pid == MyProcPid)
	{
		/* no statement may set the latch of a PGPROC we leave behind */
		pg_atomic_write_u32(&bgw_jit_shared->hibernating, 0);
		bgw_jit_shared->worker_latch = NULL;
		pg_write_barrier();
		bgw_jit_shared->worker_pid = 0;
	}
}

/*
 * Publish a cycle: the worker's current state always; the cycle's figures
 * (counters, history, the backend write count read at its start) only if
 * no reset overtook it, as they belong to the period that was reset.
 */
void
bgw_jit_publish_cycle(BgwJitCycleResult *result)
{
	BgwJitShared *s = bgw_jit_shared;
	BgwJitCycle *e = &result->entry;
	uint64		own_absorbed;

	LWLockAcquire(s->lock, LW_EXCLUSIVE);

	if (result->cleared_marks)
		s->marks_generation = result->generation;

	s->strategy = e->strategy;
	s->pacing = bgw_jit_pacing;
	s->strategy_buf_id = result->strategy_buf_id;
	s->last_cycle_at = e->at;
	s->conf_load_time = PgReloadTime;
	s->margin = e->margin;
	s->hand_rate = e->hand_rate;
	s->lead_target = e->lead_target;
	s->sleep_ms = result->hibernate ? -1 : e->sleep_ms;
	s->cpu_priority = result->cpu_priority;
	if (result->cleaned)
	{
		s->next_to_clean = result->next_to_clean;
		s->bufs_ahead = e->bufs_ahead;
		s->smoothed_alloc = e->smoothed_alloc;
		s->smoothed_density = e->smoothed_density;
		s->upcoming_alloc_est = e->upcoming_alloc_est;
	}

	/* pg_stat_bgwriter's periods are not ours: fold even if reset */
	own_absorbed = fold_bgwriter_share(s, result);
	if (s->reset_generation == result->generation)
		fold_cycle(s, result, own_absorbed);

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
 * backend's pending writes.  Returns how many of our writes this cycle's
 * reading found newly absorbed.
 */
static uint64
fold_bgwriter_share(BgwJitShared *s, BgwJitCycleResult *result)
{
	BgwJitBgwriterShare *b = &s->bgwriter;
	BgwJitCycle *e = &result->entry;
	uint64		absorbed_before = b->absorbed;

	if (b->period_reset != result->bgwriter_reset)
	{
		b->period_reset = result->bgwriter_reset;
		b->period_written = b->written;
		b->period_maxwritten = b->maxwritten;
		b->period_absorbed = b->absorbed;
		b->backend_seen = 0;
	}
	if (COMPAT_BACKEND_WRITES_INCLUDE_OWN &&
		result->backend_writes != b->backend_seen)
	{
		b->absorbed = b->written;
		b->backend_seen = result->backend_writes;
	}

	/* (a cycle that cleaned nothing may still fold in its writers' writes) */
	b->written += e->written + e->all_written;
	if (result->cleaned)
		b->maxwritten += e->hit_maxpages ? 1 : 0;
	return b->absorbed - absorbed_before;
}

/*
 * Add a cycle to the counters and the history ring; caller holds the lock.
 * own_absorbed: our writes that this cycle's reading of buffers_backend
 * found newly absorbed (15).
 */
static void
fold_cycle(BgwJitShared *s, BgwJitCycleResult *result,
		   uint64 own_absorbed)
{
	BgwJitCycle *e = &result->entry;

	s->counters.buf_alloc += e->recent_alloc;
	s->counters.hibernations += (result->hibernate && !was_hibernating) ? 1 : 0;
	was_hibernating = result->hibernate;

	/*
	 * Going backwards means the count restarted (pg_stat_reset_shared() on
	 * 15, a new worker on 16+).  On 15 buffers_backend rises when the
	 * checkpointer absorbs its queue, and then includes every write we did
	 * before this cycle began, those made before our last reset too: add
	 * the ones it newly absorbed, so that buf_backend can exclude them
	 * without subtracting writes not yet absorbed.  After our own reset the
	 * first reading is only the new baseline, and our writes it holds are
	 * not in the new period's rise.
	 */
	if (s->backend_seen_valid)
	{
		uint64		backend_writes = result->backend_writes;

		if (backend_writes != s->backend_seen)
			s->counters.backend_writes += (backend_writes > s->backend_seen) ?
				backend_writes - s->backend_seen : backend_writes;
		s->counters.own_writes_absorbed += own_absorbed;
	}
	s->backend_seen = result->backend_writes;
	s->backend_seen_valid = true;
	s->backend_read_at = result->backend_read_at;

	/*
	 * The writers' writes of pages handed to them in earlier cycles, and the
	 * judgements of earlier writes, are folded into every cycle: they count
	 * even in one that cleaned nothing (bgw_jit.enabled or lru_maxpages
	 * just set to off, with pages still in the writers' queue).
	 */
	s->counters.buf_clean += e->written;
	s->counters.buf_clean_evicted += e->evicted;
	s->counters.buf_clean_redirtied += e->redirtied;

	if (!result->cleaned)
		return;

	if (!result->continues)
		s->counters.cycles++;
	s->counters.buf_all_clean += e->all_written;
	s->counters.buf_combined += e->combined;
	s->counters.maxwritten_clean += e->hit_maxpages ? 1 : 0;
	s->counters.laps += e->lapped ? 1 : 0;
	s->counters.buffers_overrun += e->overrun;
	s->counters.buffers_scanned += e->scanned;
	s->counters.buffers_reusable += e->reusable_found;
	s->counters.buf_wal_deferred += e->wal_deferred;

	if (s->history_size > 0)
	{
		BgwJitCycle *last = (s->history_count > 0) ?
			&s->history[(s->history_count - 1) % s->history_size] : NULL;

		e->cycle = s->counters.cycles;
		if (result->continues && last && last->cycle == e->cycle)
			merge_slice(last, e);
		else
		{
			s->history[s->history_count % s->history_size] = *e;
			s->history_count++;
		}
	}
}

/*
 * Add a later slice of a cycle to the cycle's history row: one row a
 * cycle, as one estimate and one plan.  'sleep_ms' becomes the sleep after
 * the slice (1 ms while the cycle goes on), and 'sliced' says that the
 * cycle took more than one slice.
 */
static void
merge_slice(BgwJitCycle *row, const BgwJitCycle *e)
{
	row->scanned += e->scanned;
	row->written += e->written;
	row->all_written += e->all_written;
	row->combined += e->combined;
	row->reusable_found += e->reusable_found;
	row->evicted += e->evicted;
	row->redirtied += e->redirtied;
	row->wal_deferred += e->wal_deferred;
	/* (its overrun is the next cycle's, which plans on it) */
	row->lapped |= e->lapped;
	row->hit_maxpages |= e->hit_maxpages;
	row->sliced = true;
	row->sleep_ms = e->sleep_ms;
	row->cpu_us += e->cpu_us;
	row->smoothed_density = e->smoothed_density;
}

/*
 * on_shmem_exit callback of the postmaster.  Every other process has
 * exited by now, so no lock is needed.
 */
static void
stats_save(int code, Datum arg)
{
	BgwJitShared *s = bgw_jit_shared;
	StatsFileHeader hdr;
	StatsFileBody body;
	BgwJitCycle chunk[CYCLE_CHUNK];
	uint64		next;
	int			n;
	FILE	   *file;

	/* After a crash the counters may be torn: don't keep them. */
	if (code != 0 || s == NULL || !clean_shutdown())
		return;

	memset(&body, 0, sizeof(body));
	body.counters = s->counters;
	body.stats_reset = s->stats_reset;
	body.backend_seen_valid = s->backend_seen_valid;
	body.backend_seen = s->backend_seen;
	body.bgwriter = s->bgwriter;

	hdr.magic = STATS_MAGIC;
	hdr.version = STATS_VERSION;
	hdr.body_size = sizeof(StatsFileBody);
	hdr.cycle_size = sizeof(BgwJitCycle);
	hdr.ncycles = (uint32) Min(s->history_count, (uint64) s->history_size);

	/*
	 * One pass over the ring: the header goes first with the CRC still
	 * open, and again at the end with the CRC of what followed it.
	 */
	file = AllocateFile(STATS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
		goto error;
	INIT_CRC32C(hdr.crc);
	if (fwrite(&hdr, sizeof(hdr), 1, file) != 1 ||
		fwrite(&body, sizeof(body), 1, file) != 1)
		goto error;
	COMP_CRC32C(hdr.crc, &body, sizeof(body));
	next = 0;
	while ((n = bgw_jit_history_read(s, &next, s->history_count,
									 chunk, CYCLE_CHUNK)) > 0)
	{
		if (fwrite(chunk, sizeof(BgwJitCycle), n, file) != n)
			goto error;
		COMP_CRC32C(hdr.crc, chunk, sizeof(BgwJitCycle) * n);
	}
	FIN_CRC32C(hdr.crc);
	if (fseek(file, 0, SEEK_SET) != 0 ||
		fwrite(&hdr, sizeof(hdr), 1, file) != 1)
		goto error;

	/* FreeFile closes the file even when it fails: never close it twice */
	n = FreeFile(file);
	file = NULL;
	if (n != 0)
		goto error;

	(void) durable_rename(STATS_FILE ".tmp", STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", STATS_FILE ".tmp")));
	if (file)
		FreeFile(file);
	unlink(STATS_FILE ".tmp");
}

/* pg_control says the cluster was shut down cleanly (primary or standby). */
static bool
clean_shutdown(void)
{
	bool		crc_ok;
	ControlFileData *control = get_controlfile(DataDir, &crc_ok);

	return crc_ok && (control->state == DB_SHUTDOWNED ||
					  control->state == DB_SHUTDOWNED_IN_RECOVERY);
}

static void
ignore_file(const char *why)
{
	ereport(LOG,
			(errmsg("ignoring bgw_jit statistics file \"%s\": %s",
					STATS_FILE, why)));
}

/*
 * Restore what stats_save() wrote into freshly zeroed shared
 * memory, then remove the file so that a crash cannot resurrect it.
 */
static void
stats_load(BgwJitShared *s)
{
	FILE	   *file;
	StatsFileHeader hdr;
	StatsFileBody body;
	BgwJitCycle *cycles = NULL;
	pg_crc32c	crc;
	uint32		keep;

	file = AllocateFile(STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", STATS_FILE)));
		return;
	}

	if (fread(&hdr, sizeof(hdr), 1, file) != 1)
	{
		ignore_file("file is truncated");
		goto done;
	}
	if (hdr.magic != STATS_MAGIC || hdr.version != STATS_VERSION ||
		hdr.body_size != sizeof(StatsFileBody) ||
		hdr.cycle_size != sizeof(BgwJitCycle))
	{
		ignore_file("not a statistics file of this bgw_jit version");
		goto done;
	}
	if (fread(&body, sizeof(body), 1, file) != 1)
	{
		ignore_file("file is truncated");
		goto done;
	}
	if (hdr.ncycles > 1000000)
	{
		ignore_file("history length is out of range");
		goto done;
	}
	cycles = palloc(sizeof(BgwJitCycle) * Max(hdr.ncycles, 1));
	if (hdr.ncycles > 0 &&
		fread(cycles, sizeof(BgwJitCycle), hdr.ncycles, file) != hdr.ncycles)
	{
		ignore_file("file is truncated");
		goto done;
	}
	if (fgetc(file) != EOF)
	{
		ignore_file("file has trailing data");
		goto done;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &body, sizeof(body));
	COMP_CRC32C(crc, cycles, sizeof(BgwJitCycle) * hdr.ncycles);
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, hdr.crc))
	{
		ignore_file("checksum mismatch");
		goto done;
	}

	s->counters = body.counters;
	s->stats_reset = body.stats_reset;
	s->backend_seen_valid = body.backend_seen_valid;
	s->backend_seen = body.backend_seen;
	s->bgwriter = body.bgwriter;
	/* the newest cycles that fit this server's history_size */
	keep = Min(hdr.ncycles, (uint32) s->history_size);
	for (uint32 i = 0; i < keep; i++)
		s->history[i] = cycles[hdr.ncycles - keep + i];
	s->history_count = keep;

done:
	FreeFile(file);
	if (cycles)
		pfree(cycles);
	unlink(STATS_FILE);
}
