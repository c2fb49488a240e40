/*-------------------------------------------------------------------------
 *
 * writers.c
 *		Writer processes that take pages from the cleaner when one
 *		synchronous writer cannot keep up.
 *
 * The cleaner writes one page at a time and waits for each: where a write
 * is a device round trip (direct I/O, a throttled volume), its pages per
 * second are bounded by one over the time a write takes it, and on a busy
 * machine that time is mostly waiting, for the device and then for a CPU.
 * By Little's law the writes in flight needed are the demand times that
 * time; the cleaner measures both each cycle (worker.c) and, when more
 * than one writer is needed, hands every k-th page its scan would write to
 * the writer processes started here (bgw_jit.max_writers of them), through
 * a queue in shared memory, instead of writing it.  A writer writes a page
 * only if its buffer still holds it and it still qualifies, exactly as the
 * cleaner would (cleaner.c); two processes never write one buffer at once,
 * as the buffer manager's I/O-in-progress flag sees to.  A page handed
 * over is charged to the write budget (bgw_jit.max_write_rate) at once;
 * what the writers wrote is counted in shared memory and folded into the
 * cleaner's next cycle's figures.  Under buffered writes a write takes
 * microseconds and the writers stay asleep, unless waits for a CPU make
 * the cleaner's writes slow too (a saturated machine).
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgwriter.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/resowner.h"

#include "bgw_jit.h"
#include "cleaner.h"
#include "compat.h"
#include "errors.h"
#include "writers.h"

/* Pages handed over and not yet taken, at most. */
#define WRITE_QUEUE_SIZE	1024

typedef struct QueuedPage
{
	int			buf_id;
	BufferTag	tag;
} QueuedPage;

typedef struct WritersShared
{
	slock_t		mutex;			/* protects the queue */
	uint32		head;			/* next slot to fill */
	uint32		tail;			/* next slot to take */
	QueuedPage	queue[WRITE_QUEUE_SIZE];
	pg_atomic_uint64 written;
	pg_atomic_uint64 evicted;
	pg_atomic_uint64 redirtied;
	pg_atomic_uint64 reported;	/* of 'written', those flushed to pgstat */
	/* each writer's latch while it runs, NULL otherwise */
	Latch	   *latch[BGW_JIT_WRITERS_MAX];
	int			pid[BGW_JIT_WRITERS_MAX];
} WritersShared;

static WritersShared *writers = NULL;

PGDLLEXPORT void bgw_jit_writer_main(Datum main_arg);

static bool pop_page(QueuedPage *page);
static void writer_exit(int code, Datum arg);
static void report_writes(uint64 *unreported);

Size
bgw_jit_writers_shmem_size(void)
{
	return sizeof(WritersShared);
}

/* Attach to the queue; the caller holds AddinShmemInitLock. */
void
bgw_jit_writers_shmem_startup(void)
{
	bool		found;

	writers = ShmemInitStruct("bgw_jit writers", sizeof(WritersShared),
							  &found);
	if (!found)
	{
		memset(writers, 0, sizeof(WritersShared));
		SpinLockInit(&writers->mutex);
		pg_atomic_init_u64(&writers->written, 0);
		pg_atomic_init_u64(&writers->evicted, 0);
		pg_atomic_init_u64(&writers->redirtied, 0);
		pg_atomic_init_u64(&writers->reported, 0);
	}
}

/* How many writers run now. */
int
bgw_jit_writers_running(void)
{
	int			n = 0;

	for (int i = 0; i < BGW_JIT_WRITERS_MAX; i++)
		if (writers->latch[i] != NULL)
			n++;
	return n;
}

/*
 * Hand page 'tag' in buffer 'buf_id' to the writers, waking up to
 * 'nwriters' of them; false if no writer runs or the queue is full (the
 * caller writes it then).
 */
bool
bgw_jit_writers_push(int buf_id, const BufferTag *tag, int nwriters)
{
	bool		queued = false;
	int			woken = 0;

	SpinLockAcquire(&writers->mutex);
	if (writers->head - writers->tail < WRITE_QUEUE_SIZE)
	{
		QueuedPage *slot = &writers->queue[writers->head % WRITE_QUEUE_SIZE];

		slot->buf_id = buf_id;
		slot->tag = *tag;
		writers->head++;
		queued = true;
	}
	SpinLockRelease(&writers->mutex);
	if (!queued)
		return false;

	for (int i = 0; i < BGW_JIT_WRITERS_MAX && woken < nwriters; i++)
	{
		Latch	   *latch = writers->latch[i];

		if (latch != NULL)
		{
			SetLatch(latch);
			woken++;
		}
	}
	return woken > 0;
}

/* What the writers have done so far. */
void
bgw_jit_writers_done(WritersDone *done)
{
	done->written = pg_atomic_read_u64(&writers->written);
	done->evicted = pg_atomic_read_u64(&writers->evicted);
	done->redirtied = pg_atomic_read_u64(&writers->redirtied);
	done->reported = pg_atomic_read_u64(&writers->reported);
}

static bool
pop_page(QueuedPage *page)
{
	bool		found = false;

	SpinLockAcquire(&writers->mutex);
	if (writers->tail != writers->head)
	{
		*page = writers->queue[writers->tail % WRITE_QUEUE_SIZE];
		writers->tail++;
		found = true;
	}
	SpinLockRelease(&writers->mutex);
	return found;
}

/* This writer runs no more: nobody may set its latch. */
static void
writer_exit(int code, Datum arg)
{
	int			i = DatumGetInt32(arg);

	if (writers != NULL && writers->pid[i] == MyProcPid)
	{
		writers->latch[i] = NULL;
		pg_write_barrier();
		writers->pid[i] = 0;
	}
}

void
bgw_jit_writer_main(Datum main_arg)
{
	int			slot = DatumGetInt32(main_arg);
	sigjmp_buf	local_sigjmp_buf;

	/* (static: kept across the longjmp of an ERROR) */
	static WritebackContext wb_context;
	static int	flush_after = 0;
	static instr_time reported_at;	/* first write not yet reported */
	static uint64 unreported = 0;	/* writes not yet flushed to pgstat */

	/* as the cleaner (worker.c): leave at the next page, exit code 1 */
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, PG_SIG_IGN);
	bgw_jit_compat_join_procsignal();
	BackgroundWorkerUnblockSignals();
	/* a pin needs a resource owner */
	CreateAuxProcessResourceOwner();

	flush_after = (bgw_jit_flush_after >= 0) ? bgw_jit_flush_after :
		bgwriter_flush_after;
	WritebackContextInit(&wb_context, &flush_after);

	writers->pid[slot] = MyProcPid;
	pg_write_barrier();
	writers->latch[slot] = MyLatch;
	before_shmem_exit(writer_exit, Int32GetDatum(slot));

	/*
	 * An ERROR writing a page comes back here: logged, the page dropped
	 * (the cleaner meets it again at its next lap), and the writer goes on
	 * after a pause, as the cleaner does.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		HOLD_INTERRUPTS();
		bgw_jit_error_cleanup("a bgw_jit writer");
		WritebackContextInit(&wb_context, &flush_after);
		RESUME_INTERRUPTS();
		bgw_jit_error_pause();
		compat_smgr_free_all();
	}
	PG_exception_stack = &local_sigjmp_buf;

	while (!ShutdownRequestPending)
	{
		QueuedPage page;
		int			taken = 0;
		long		timeout = -1;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* Don't keep files of dropped relations open across checkpoints. */
		if (FirstCallSinceLastCheckpoint())
			compat_smgr_free_all();

		/* (the latch was reset first: a page pushed meanwhile sets it) */
		while (!ShutdownRequestPending && pop_page(&page))
		{
			int			outcome;

			outcome = bgw_jit_cleaner_write_claimed(page.buf_id, &page.tag,
													&wb_context);
			if (outcome & CLEANER_WRITTEN)
			{
				pg_atomic_fetch_add_u64(&writers->written, 1);
				if (unreported++ == 0)
					INSTR_TIME_SET_CURRENT(reported_at);
			}
			if (outcome & CLEANER_EVICTED)
				pg_atomic_fetch_add_u64(&writers->evicted, 1);
			if (outcome & CLEANER_REDIRTIED)
				pg_atomic_fetch_add_u64(&writers->redirtied, 1);
			if ((++taken & 63) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		/* its writes reach pg_stat_io within a second; idle, it sleeps */
		if (unreported > 0)
		{
			timeout = 1000 - (long) bgw_jit_ms_since(reported_at);
			if (timeout <= 0)
			{
				report_writes(&unreported);
				timeout = -1;
			}
		}
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						 (timeout > 0 ? WL_TIMEOUT : 0),
						 timeout, PG_WAIT_EXTENSION);
	}
	report_writes(&unreported);
	proc_exit(1);				/* see worker.c's set_up_signals() */
}

/*
 * Flush this writer's statistics, then count its writes as reported: the
 * cleaner takes the writers' writes out of the pg_stat_io figure it reads
 * as the backends' (compat.c), and may do so only once they are in it.
 */
static void
report_writes(uint64 *unreported)
{
	if (*unreported == 0)
		return;
	pgstat_report_stat(true);
	pg_atomic_fetch_add_u64(&writers->reported, *unreported);
	*unreported = 0;
}
