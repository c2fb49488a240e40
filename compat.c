/*-------------------------------------------------------------------------
 *
 * compat.c
 *		Backend write counts, from whichever statistics the server keeps.
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
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/instrument.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"

#include "compat.h"

/* How often the worker reports its statistics (and samples pg_stat_io). */
#define REPORT_INTERVAL_MS	1000

#if PG_VERSION_NUM >= 160000

/* The worker's view of others' writes, advanced at each sample. */
static uint64 others_writes = 0;
static bool sample_valid = false;
static TimestampTz io_stats_reset;
static PgStat_Counter io_writes_seen;	/* shared counter at last sample */
static int64 own_writes_seen;	/* our writes at last sample */

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
 * writes.
 */
static void
sample_backend_writes(void)
{
	TimestampTz stat_reset;
	PgStat_Counter writes = io_backend_writes(&stat_reset);
	int64		own = pgBufferUsage.shared_blks_written;

	if (sample_valid)
	{
		int64		own_delta = own - own_writes_seen;
		int64		delta;

		if (stat_reset == io_stats_reset && writes >= io_writes_seen)
			delta = (writes - io_writes_seen) - own_delta;
		else
		{
			/*
			 * pg_stat_reset_shared('io') since the last sample: the counters
			 * restarted at some moment in between, so our writes since the
			 * last sample are at most own_delta of them.
			 */
			delta = writes - own_delta;
		}
		others_writes += Max(delta, 0);
	}
	sample_valid = true;
	io_stats_reset = stat_reset;
	io_writes_seen = writes;
	own_writes_seen = own;
}
#endif							/* PG_VERSION_NUM >= 160000 */

/* When the worker last reported its statistics. */
static TimestampTz last_report = 0;

/* Flush the worker's statistics now; on 16+ sample pg_stat_io after. */
static void
report_now(TimestampTz now)
{
	last_report = now;
	pgstat_report_stat(true);
#if PG_VERSION_NUM >= 160000
	sample_backend_writes();
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
 * pending, which the sample needs.
 */
void
compat_report_stat(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (last_report == 0 ||
		TimestampDifferenceExceeds(last_report, now, REPORT_INTERVAL_MS))
		report_now(now);
}

/*
 * Writes by processes other than the bgwriter and checkpointer, as far as
 * known: on 15 pg_stat_bgwriter.buffers_backend as last absorbed, this
 * worker's writes included (honours the caller's stats_fetch_consistency);
 * on 16+ a count private to the worker that excludes its own writes,
 * starting from 0 when the worker starts.  Only the worker calls this.
 * With 'rebaseline' the caller takes the figure as a new starting point:
 * on 16+ it is then sampled afresh, so that nothing reported before this
 * call is counted after it.
 */
uint64
compat_backend_writes(bool rebaseline)
{
#if PG_VERSION_NUM >= 160000
	if (rebaseline)
		report_now(GetCurrentTimestamp());
	return others_writes;
#else
	return (uint64) pgstat_fetch_stat_checkpointer()->buf_written_backend;
#endif
}
