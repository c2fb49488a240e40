/*-------------------------------------------------------------------------
 *
 * flusher.c
 *		The bgw_jit WAL flusher: flushes WAL on the cleaner's behalf, so
 *		that the cleaner never waits for a WAL fsync.
 *
 * A dirty page may be written only once the WAL up to its LSN is on disk.
 * Core's writer calls XLogFlush() itself, and so does FlushBuffer() when
 * the cleaner writes a page whose WAL is not flushed yet (with
 * synchronous_commit = off the WAL writer flushes only every
 * wal_writer_delay or wal_writer_flush_after).  That fsync takes
 * milliseconds, and tens of them while the kernel writes data back; on a
 * small pool the clock hand laps the whole pool in such a stall, and
 * every dirty buffer it meets on the way is written by a backend.  So the
 * cleaner puts such a page off (scan.c), asks this process for the flush
 * and goes on with the next buffer; it writes the page at a later cycle,
 * once the WAL is on disk.  In recovery XLogFlush() advances
 * minRecoveryPoint instead, which is just as slow (the control file is
 * fsynced), and the same holds.
 *
 * The request is one LSN in shared memory, raised by the cleaner and
 * taken by the flusher; one XLogFlush() flushes all the WAL inserted so
 * far, so one request covers every page put off since the last.  While
 * no flusher runs (it starts with the cleaner, and restarts after an
 * error), the cleaner flushes for itself, as core's writer does.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/resowner.h"

#include "bgw_jit.h"
#include "compat.h"
#include "errors.h"
#include "flusher.h"
#include "shmem.h"

PGDLLEXPORT void bgw_jit_flusher_main(Datum main_arg);

static void flusher_exit(int code, Datum arg);

/* Whether a flusher runs to take the cleaner's requests. */
bool
bgw_jit_wal_flusher_running(void)
{
	return bgw_jit_shared->flusher_latch != NULL;
}

/*
 * Ask the flusher to flush the WAL up to 'lsn'; false if no flusher runs
 * (the caller then flushes for itself).  Only the cleaner calls this.
 */
bool
bgw_jit_request_wal_flush(XLogRecPtr lsn)
{
	BgwJitShared *s = bgw_jit_shared;
	Latch	   *latch = s->flusher_latch;

	if (latch == NULL)
		return false;
	if (pg_atomic_read_u64(&s->flush_request) < lsn)
	{
		/* the flusher only ever resets it to 0: a plain raise will do */
		pg_atomic_write_u64(&s->flush_request, lsn);
		SetLatch(latch);
	}
	return true;
}

/*
 * Whether the WAL up to 'lsn' still needs flushing and a flusher runs to
 * do it: a page put off for that LSN is not worth another look yet.
 */
bool
bgw_jit_wal_flush_pending(XLogRecPtr lsn)
{
	return bgw_jit_wal_flusher_running() && XLogNeedsFlush(lsn);
}

/* No flusher runs any more: the cleaner flushes for itself again. */
static void
flusher_exit(int code, Datum arg)
{
	if (bgw_jit_shared != NULL && bgw_jit_shared->flusher_pid == MyProcPid)
	{
		bgw_jit_shared->flusher_latch = NULL;
		bgw_jit_shared->flusher_pid = 0;
	}
}

void
bgw_jit_flusher_main(Datum main_arg)
{
	BgwJitShared *s = bgw_jit_shared;
	sigjmp_buf	local_sigjmp_buf;
	volatile bool stats_pending = false;

	/* (static: kept across the longjmp of an ERROR) */
	static instr_time flushed_at;

	/*
	 * SIGTERM: leave at the next round, exit code 1, as the cleaner does
	 * (worker.c); SIGINT ignored, as there is no statement to cancel.
	 */
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, PG_SIG_IGN);
	bgw_jit_compat_join_procsignal();
	BackgroundWorkerUnblockSignals();
	/* (what compat_release_after_error() releases after an ERROR) */
	CreateAuxProcessResourceOwner();

	s->flusher_pid = MyProcPid;
	pg_write_barrier();
	s->flusher_latch = MyLatch;
	before_shmem_exit(flusher_exit, (Datum) 0);

	/*
	 * An ERROR (XLogFlush() refusing an LSN past the end of WAL, from a
	 * damaged page) comes back here: logged, the request dropped, and the
	 * flusher carries on after a pause, as core's WAL writer does.  Exiting
	 * instead would repeat at every lap of the cleaner over that page.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		HOLD_INTERRUPTS();
		bgw_jit_error_cleanup("the bgw_jit wal flusher");
		RESUME_INTERRUPTS();
		bgw_jit_error_pause();
	}
	PG_exception_stack = &local_sigjmp_buf;

	while (!ShutdownRequestPending)
	{
		XLogRecPtr	lsn;
		long		timeout = -1;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * Take the request after resetting the latch, so that one raised
		 * meanwhile sets it again and is seen at the next round.  A
		 * request that fails is dropped: the cleaner asks again when it
		 * meets the page again.
		 */
		lsn = pg_atomic_exchange_u64(&s->flush_request, InvalidXLogRecPtr);
		if (lsn != InvalidXLogRecPtr && XLogNeedsFlush(lsn))
		{
#ifdef BGW_JIT_FAULT_INJECTION
			if (bgw_jit_inject_error == BGW_JIT_INJECT_FLUSH)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("injected error flushing WAL up to %X/%X",
								LSN_FORMAT_ARGS(lsn))));
#endif
			XLogFlush(lsn);
			if (!stats_pending)
				INSTR_TIME_SET_CURRENT(flushed_at);
			stats_pending = true;
		}

		/* the flushes' WAL statistics reach pgstat within a second */
		if (stats_pending)
		{
			timeout = 1000 - (long) bgw_jit_ms_since(flushed_at);
			if (timeout <= 0)
			{
				pgstat_report_stat(true);
				stats_pending = false;
				timeout = -1;
			}
		}
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						 (timeout > 0 ? WL_TIMEOUT : 0),
						 timeout, PG_WAIT_EXTENSION);
	}
	proc_exit(1);				/* see worker.c's bgw_jit_main() */
}
