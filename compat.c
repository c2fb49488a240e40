/*-------------------------------------------------------------------------
 *
 * compat.c
 *		Backend write counts, from whichever statistics the server keeps,
 *		and pg_stat_bgwriter's figures in one shape on every version.
 *
 * On 15, pg_stat_bgwriter.buffers_backend counts the data-file writes of
 * every process but the bgwriter and checkpointer, this worker's included,
 * and reaches pgstat only when the checkpointer absorbs its queue.
 *
 * From 16, pg_stat_io counts writes per backend type and I/O context as
 * each process flushes its pending statistics.  The worker's own writes
 * are among the "background worker" ones; it takes them away exactly by
 * sampling the shared counters right after flushing all of its own
 * statistics, so that the shared counters hold precisely the writes it
 * has done (pgBufferUsage.shared_blks_written, bumped next to
 * pg_stat_io's write count in FlushBuffer).  Per-backend I/O statistics
 * (18+) would give the same figure under the same condition, but can be
 * reset from outside (pg_stat_reset_backend_stats), so they are not used.
 *
 * And how a worker without a database connection joins ProcSignal, which
 * each version does in its own way.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/instrument.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/procsignal.h"
#if PG_VERSION_NUM < 170000
#include "storage/sinvaladt.h"
#endif
#include "utils/timestamp.h"

#include "bgw_jit.h"
#include "compat.h"

/* How often the worker reports its statistics (and samples pg_stat_io). */
#define REPORT_INTERVAL_MS	1000

#if PG_VERSION_NUM >= 160000

/*
 * The worker's view of others' writes, advanced at each sample: a running
 * sum of the samples' deltas, and what was published, which never goes
 * back (a writer's writes reach pg_stat_io just before they count as
 * reported, so a sample between the two over-counts them and the next
 * one gives them back).
 */
static int64 others_sum = 0;
static uint64 others_writes = 0;
static bool sample_valid = false;
static TimestampTz io_stats_reset;
static PgStat_Counter io_writes_seen;	/* shared counter at last sample */
static int64 own_writes_seen;	/* our writes at last sample */
static uint64 writers_seen;		/* the writers' reported writes, likewise */
static TimestampTz sampled_at;	/* when others_writes was last advanced */

/*
 * Normal-context relation writes in pg_stat_io by every backend type but
 * the bgwriter and the checkpointer (the processes 15's buffers_backend
 * left out).
 */
static PgStat_Counter
io_backend_writes(TimestampTz *stat_reset)
{
	PgStat_IO  *io = pgstat_fetch_stat_io();
	PgStat_Counter writes = 0;

	for (int bktype = 0; bktype < BACKEND_NUM_TYPES; bktype++)
	{
		if (bktype == B_CHECKPOINTER || bktype == B_BG_WRITER)
			continue;
		writes += io->stats[bktype].counts[IOOBJECT_RELATION][IOCONTEXT_NORMAL][IOOP_WRITE];
	}
	*stat_reset = io->stat_reset_timestamp;
	return writes;
}

/*
 * Advance others_writes.  Only call right after a full flush of this
 * process's statistics, so the shared counters include exactly its own
 * writes.  The writers' writes (writers.c) are the cleaner's too: those
 * they have reported, by writers_reported(), are taken out.  It is asked
 * after pg_stat_io is read, so that a writer reporting in between makes
 * the sample low, which the next one corrects, never high, which would
 * stay (others_writes never goes down).
 */
static void
sample_backend_writes(uint64 (*writers_reported) (void))
{
	TimestampTz stat_reset;
	PgStat_Counter writes = io_backend_writes(&stat_reset);
	int64		own = pgBufferUsage.shared_blks_written;
	uint64		writers = writers_reported();

	if (sample_valid)
	{
		int64		own_delta = (own - own_writes_seen) +
			(int64) (writers - writers_seen);

		if (stat_reset == io_stats_reset && writes >= io_writes_seen)
			others_sum += (writes - io_writes_seen) - own_delta;
		else
		{
			/*
			 * pg_stat_reset_shared('io') since the last sample: the counters
			 * restarted at some moment in between, so our writes since the
			 * last sample are at most own_delta of them.
			 */
			others_sum = (int64) others_writes + Max(writes - own_delta, 0);
		}
		if (others_sum > (int64) others_writes)
			others_writes = (uint64) others_sum;
	}
	sample_valid = true;
	writers_seen = writers;
	sampled_at = GetCurrentTimestamp();
	io_stats_reset = stat_reset;
	io_writes_seen = writes;
	own_writes_seen = own;
}
#endif							/* PG_VERSION_NUM >= 160000 */

/* When the worker last reported its statistics (monotonic clock). */
static bool reported = false;
static instr_time last_report;

/*
 * Flush the worker's statistics now; on 16+ sample pg_stat_io after.
 * writers_reported(): the writes its writers have reported so far.
 */
static void
report_now(uint64 (*writers_reported) (void))
{
	INSTR_TIME_SET_CURRENT(last_report);
	reported = true;
	pgstat_report_stat(true);
#if PG_VERSION_NUM >= 160000
	sample_backend_writes(writers_reported);
#endif
}

/*
 * Send the worker's pending statistics to the shared ones about once a
 * second, so that its writes show in pg_stat_io promptly, not at exit;
 * on 16+ take a sample of the backend writes right after.
 *
 * The flush is forced: unforced, pgstat_report_stat() paces itself by the
 * transaction stop time, which outside transactions never advances (on
 * 16+ it is cached at the first call), so after one flush it would hold
 * everything back until exit.  A forced flush also leaves nothing of ours
 * pending, which the sample needs.  writers_reported(): the writes the
 * worker's writers have reported so far (writers.c).
 */
void
bgw_jit_compat_report_stat(uint64 (*writers_reported) (void))
{
	if (reported && bgw_jit_ms_since(last_report) < REPORT_INTERVAL_MS)
		return;
	report_now(writers_reported);
}

/*
 * Writes by processes other than the bgwriter and checkpointer, as far as
 * known: on 15 pg_stat_bgwriter.buffers_backend as last absorbed, this
 * worker's writes included (honours the caller's stats_fetch_consistency);
 * on 16+ a count private to the worker that excludes its own writes,
 * starting from 0 when the worker starts.  Only the worker calls this.
 * With 'rebaseline' the caller takes the figure as a new starting point:
 * on 16+ it is then sampled afresh, so that nothing reported before this
 * call is counted after it (writers_reported() as for
 * bgw_jit_compat_report_stat()).  *read_at: when the figure was read from
 * the cumulative statistics (16+: the last sample; 15: now).
 */
uint64
bgw_jit_compat_backend_writes(bool rebaseline,
							  uint64 (*writers_reported) (void),
							  TimestampTz *read_at)
{
#if PG_VERSION_NUM >= 160000
	if (rebaseline)
		report_now(writers_reported);
	*read_at = sampled_at;
	return others_writes;
#else
	*read_at = GetCurrentTimestamp();
	return (uint64) pgstat_fetch_stat_checkpointer()->buf_written_backend;
#endif
}

/*
 * The server's pg_stat_bgwriter figures (15) or pg_stat_bgwriter's and
 * pg_stat_checkpointer's (17+), in 15's shape, as the server's own views
 * read them: under the caller's stats_fetch_consistency.
 */
void
bgw_jit_compat_bgwriter_stats(CompatBgwriterStats *out)
{
	PgStat_BgWriterStats *bgwriter = pgstat_fetch_stat_bgwriter();
	PgStat_CheckpointerStats *checkpointer = pgstat_fetch_stat_checkpointer();

	memset(out, 0, sizeof(*out));
#if PG_VERSION_NUM >= 170000
	out->checkpoints_timed = checkpointer->num_timed;
	out->checkpoints_req = checkpointer->num_requested;
	out->checkpoint_write_time = (double) checkpointer->write_time;
	out->checkpoint_sync_time = (double) checkpointer->sync_time;
	out->buffers_checkpoint = checkpointer->buffers_written;
	out->has_backend = false;
#else
	out->checkpoints_timed = checkpointer->timed_checkpoints;
	out->checkpoints_req = checkpointer->requested_checkpoints;
	out->checkpoint_write_time = (double) checkpointer->checkpoint_write_time;
	out->checkpoint_sync_time = (double) checkpointer->checkpoint_sync_time;
	out->buffers_checkpoint = checkpointer->buf_written_checkpoints;
	out->has_backend = true;
	out->buffers_backend = checkpointer->buf_written_backend;
	out->buffers_backend_fsync = checkpointer->buf_fsync_backend;
#endif
	out->buffers_clean = bgwriter->buf_written_clean;
	out->maxwritten_clean = bgwriter->maxwritten_clean;
	out->buffers_alloc = bgwriter->buf_alloc;
	out->stats_reset = bgwriter->stat_reset_timestamp;
}

/*
 * Take part in ProcSignal barriers, as every process that opens data files
 * must.  DROP DATABASE, DROP TABLESPACE and ALTER DATABASE SET TABLESPACE
 * (and their replay on a standby or in crash recovery) send
 * PROCSIGNAL_BARRIER_SMGRRELEASE and wait until every process in ProcSignal
 * has closed its data-file descriptors before the files go.  A process
 * outside it keeps descriptors of the unlinked files, and once a database
 * is created again with the same OID, its writes of the new relations go
 * to the old inodes and are lost.  A background worker joins ProcSignal
 * only through a database connection (InitPostgres), which the cleaner
 * cannot have: it starts with the postmaster and runs through recovery.
 * So join here, as the auxiliary processes do.  The barrier is then
 * absorbed at CHECK_FOR_INTERRUPTS().  Call before signals are unblocked.
 *
 * 15 indexes ProcSignal's slots by backend ID, which comes with a slot in
 * the shared invalidation array: take one as a send-only member (as the
 * startup process does in hot standby), which is never asked to read
 * messages.  The array has a slot for each of the MaxBackends processes
 * with a PGPROC like the worker's, so one is always free for it.  From 17
 * the slot is the process number that InitProcess() gave every process.
 */
void
bgw_jit_compat_join_procsignal(void)
{
#if PG_VERSION_NUM >= 180000
	ProcSignalInit(NULL, 0);
#elif PG_VERSION_NUM >= 170000
	ProcSignalInit();
#else
	SharedInvalBackendInit(true);
	ProcSignalInit(MyBackendId);
#endif
	/* bgworker.c ignores SIGUSR1 in workers without a connection */
	pqsignal(SIGUSR1, procsignal_sigusr1_handler);
}
