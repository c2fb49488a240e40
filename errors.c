/*-------------------------------------------------------------------------
 *
 * errors.c
 *		Recovery from an ERROR, shared by bgw_jit's two workers: the error
 *		logged at a bounded rate, what the process held released, and a
 *		pause before the work goes on.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "bgw_jit.h"
#include "compat.h"
#include "errors.h"

/*
 * After an ERROR a worker sleeps BGW_JIT_ERROR_SLEEP_MS, as core's writer
 * does, and logs each distinct error (by its message) at most once per
 * BGW_JIT_ERROR_LOG_INTERVAL seconds: a persistent write failure (a full
 * tablespace, a file it may not write) repeats at every lap of the pool.
 * The last ERROR_LOG_SLOTS distinct errors are remembered.
 */
#define ERROR_LOG_SLOTS			8

/* Rate limit of the error log: the errors logged last, by message. */
typedef struct LoggedError
{
	uint32		hash;			/* of the SQLSTATE and message; 0: free */
	instr_time	at;
} LoggedError;

static LoggedError logged_errors[ERROR_LOG_SLOTS];
static int	errors_not_logged = 0;

static bool error_log_due(uint32 hash);

/*
 * Whether an error of this hash may be logged now: not if the same was
 * logged less than BGW_JIT_ERROR_LOG_INTERVAL seconds ago.  Notes it as
 * logged if so.
 */
static bool
error_log_due(uint32 hash)
{
	LoggedError *slot = &logged_errors[0];

	for (int i = 0; i < ERROR_LOG_SLOTS; i++)
	{
		LoggedError *e = &logged_errors[i];

		if (e->hash == hash)
		{
			if (bgw_jit_ms_since(e->at) < BGW_JIT_ERROR_LOG_INTERVAL * 1000.0)
				return false;
			slot = e;
			break;
		}
		/* else take a free slot, or the one logged longest ago */
		if (slot->hash != 0 &&
			(e->hash == 0 || INSTR_TIME_GET_DOUBLE(e->at) <
			 INSTR_TIME_GET_DOUBLE(slot->at)))
			slot = e;
	}
	slot->hash = hash;
	INSTR_TIME_SET_CURRENT(slot->at);
	return true;
}

/*
 * The part of recovering from an ERROR that both workers share, called
 * from their sigsetjmp blocks with the error still current and interrupts
 * held: log the error (see error_log_due()), release what the process
 * held in the order core's writer does (LWLocks, the I/O in progress,
 * then buffer pins: on 15 the I/O must be aborted while the buffer is
 * still pinned), and clear the error, in TopMemoryContext.  'what' names
 * the process.
 */
void
bgw_jit_error_cleanup(const char *what)
{
	ErrorData  *edata;
	uint32		hash;
	bool		logged;

	/* since not using PG_TRY, reset the error stack by hand */
	error_context_stack = NULL;

	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	hash = hash_combine(hash_bytes_uint32((uint32) edata->sqlerrcode),
						hash_bytes((const unsigned char *) edata->message,
								   edata->message ? strlen(edata->message) : 0));
	FreeErrorData(edata);
	logged = error_log_due(hash == 0 ? 1 : hash);
	if (logged)
		EmitErrorReport();
	else
		errors_not_logged++;

	compat_release_after_error();
	FlushErrorState();

	if (logged && errors_not_logged > 0)
	{
		ereport(LOG,
				(errmsg_plural("%s did not log %d earlier error",
							   "%s did not log %d earlier errors",
							   errors_not_logged, what, errors_not_logged),
				 errdetail_plural("It logs each distinct error at most once every %d second.",
								  "It logs each distinct error at most once every %d seconds.",
								  BGW_JIT_ERROR_LOG_INTERVAL,
								  BGW_JIT_ERROR_LOG_INTERVAL)));
		errors_not_logged = 0;
	}
}

/*
 * The pause after an ERROR: BGW_JIT_ERROR_SLEEP_MS, whatever sets the
 * latch meanwhile (the cleaner's flush requests, statement starts), unless
 * a shutdown is asked for.
 */
void
bgw_jit_error_pause(void)
{
	instr_time	start;
	double		left;

	INSTR_TIME_SET_CURRENT(start);
	while (!ShutdownRequestPending &&
		   (left = BGW_JIT_ERROR_SLEEP_MS - bgw_jit_ms_since(start)) > 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) ceil(left), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
