/*-------------------------------------------------------------------------
 *
 * stats.c
 *		SQL-callable functions: statistics, history, reset and replay.
 *
 * Readers copy what they need under a shared lock and build tuples after
 * releasing it, so a query never holds up the worker for long.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "bgw_jit.h"
#include "compat.h"
#include "estimator.h"
#include "pacer.h"
#include "shmem.h"

/*
 * The SQL definitions of each extension version call their own C symbols,
 * so that a newer library keeps serving an install not yet updated with
 * ALTER EXTENSION ... UPDATE: each symbol fills exactly the columns its
 * version declares.  A column added in a later version is appended under
 * "if (api >= ...)"; the counts below must follow.
 */
typedef enum BgwJitApi
{
	BGW_JIT_API_1_0,
	BGW_JIT_API_1_1,
	BGW_JIT_API_1_2,
	BGW_JIT_API_1_3
} BgwJitApi;

#define STATS_COLS_1_0		21
#define STATS_COLS_1_1		29
#define STATS_COLS_1_2		30
#define STATS_COLS_1_3		33
#define STATS_COLS_MAX		33
#define HISTORY_COLS_1_0	19
#define HISTORY_COLS_1_1	27
#define HISTORY_COLS_1_2	28
#define HISTORY_COLS_1_3	34
#define HISTORY_COLS_MAX	34
#define BGWRITER_COLS_1_2	3
#define CORE_BGWRITER_COLS	11
#define REPLAY_COLS			6
#define REPLAY_PACER_COLS	11

/* History cycles copied per acquisition of the lock (~24 kB). */
#define HISTORY_CHUNK		256

PG_FUNCTION_INFO_V1(bgw_jit_stats);
PG_FUNCTION_INFO_V1(bgw_jit_stats_1_1);
PG_FUNCTION_INFO_V1(bgw_jit_stats_1_2);
PG_FUNCTION_INFO_V1(bgw_jit_stats_1_3);
PG_FUNCTION_INFO_V1(bgw_jit_history);
PG_FUNCTION_INFO_V1(bgw_jit_history_1_1);
PG_FUNCTION_INFO_V1(bgw_jit_history_1_2);
PG_FUNCTION_INFO_V1(bgw_jit_history_1_3);
PG_FUNCTION_INFO_V1(bgw_jit_bgwriter_1_2);
PG_FUNCTION_INFO_V1(bgw_jit_core_bgwriter);
PG_FUNCTION_INFO_V1(bgw_jit_reset);
PG_FUNCTION_INFO_V1(bgw_jit_replay);
PG_FUNCTION_INFO_V1(bgw_jit_replay_pacer);

static Datum
timestamp_or_null(TimestampTz ts, bool *isnull)
{
	*isnull = (ts == 0);
	return TimestampTzGetDatum(ts);
}

/*
 * Refuse a result row type of another width than the 'expected' columns
 * we fill, e.g. a hand-made declaration of one of our C functions.
 */
static void
check_result_columns(TupleDesc tupdesc, const char *fname, int expected)
{
	if (tupdesc->natts != expected)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("function %s returns %d columns, but the bgw_jit library fills %d",
						fname, tupdesc->natts, expected),
				 errhint("Declare the function as the bgw_jit extension scripts do, or run ALTER EXTENSION bgw_jit UPDATE.")));
}

/*
 * bgw_jit_stats() - one row of cumulative counters and current state.
 */
static Datum
stats_internal(FunctionCallInfo fcinfo, BgwJitApi api)
{
	BgwJitShared *s;
	BgwJitShared snap;
	uint64		buf_backend;
	TupleDesc	tupdesc;
	Datum		values[STATS_COLS_MAX];
	bool		nulls[STATS_COLS_MAX];
	int			i = 0;

	bgw_jit_check_loaded();
	s = bgw_jit_shared;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	check_result_columns(tupdesc, "bgw_jit_stats",
						 api >= BGW_JIT_API_1_3 ? STATS_COLS_1_3 :
						 api >= BGW_JIT_API_1_2 ? STATS_COLS_1_2 :
						 api >= BGW_JIT_API_1_1 ? STATS_COLS_1_1 : STATS_COLS_1_0);

	LWLockAcquire(s->lock, LW_SHARED);
	memcpy(&snap, s, offsetof(BgwJitShared, history));
	LWLockRelease(s->lock);

	/* core counts our writes as backend writes: take away those it has */
	buf_backend = (snap.counters.backend_writes > snap.counters.own_writes_absorbed) ?
		snap.counters.backend_writes - snap.counters.own_writes_absorbed : 0;

	memset(nulls, 0, sizeof(nulls));
	values[i++] = CStringGetTextDatum(bgw_jit_strategy_name(snap.strategy));
	values[i++] = Int64GetDatum(snap.counters.buf_clean);
	values[i++] = Int64GetDatum(snap.counters.buf_all_clean);
	values[i++] = Int64GetDatum(buf_backend);
	values[i++] = Int64GetDatum(snap.counters.buf_alloc);
	/* 1.0 called these buf_clean_useful and buf_clean_wasted */
	values[i++] = Int64GetDatum(snap.counters.buf_clean_evicted);
	values[i++] = Int64GetDatum(snap.counters.buf_clean_redirtied);
	values[i++] = Int64GetDatum(snap.counters.maxwritten_clean);
	values[i++] = Int64GetDatum(snap.counters.cycles);
	values[i++] = Int64GetDatum(snap.counters.laps);
	values[i++] = Int64GetDatum(snap.counters.hibernations);
	values[i++] = Int64GetDatum(snap.counters.buffers_scanned);
	values[i++] = Int64GetDatum(snap.counters.buffers_reusable);
	values[i++] = Int32GetDatum(snap.strategy_buf_id);
	values[i++] = Int32GetDatum(snap.next_to_clean);
	values[i++] = Int32GetDatum(snap.bufs_ahead);
	values[i++] = Float8GetDatum(snap.smoothed_alloc);
	values[i++] = Float8GetDatum(snap.smoothed_density);
	values[i++] = Int32GetDatum(snap.upcoming_alloc_est);
	values[i] = timestamp_or_null(snap.last_cycle_at, &nulls[i]);
	i++;
	values[i] = timestamp_or_null(snap.stats_reset, &nulls[i]);
	i++;
	if (api >= BGW_JIT_API_1_1)
	{
		values[i] = timestamp_or_null(snap.conf_load_time, &nulls[i]);
		i++;
		values[i++] = CStringGetTextDatum(bgw_jit_pacing_name(snap.pacing));
		values[i++] = Float8GetDatum(snap.margin);
		values[i++] = Float8GetDatum(snap.hand_rate);
		values[i++] = Int32GetDatum(snap.lead_target);
		nulls[i] = (snap.sleep_ms < 0);
		values[i++] = Int32GetDatum(snap.sleep_ms);
		values[i++] = Int64GetDatum(snap.counters.buffers_overrun);
		values[i++] = CStringGetTextDatum(bgw_jit_cpu_priority_name(snap.cpu_priority));
	}
	if (api >= BGW_JIT_API_1_2)
		values[i++] = Int64GetDatum(snap.counters.buf_combined);
	if (api >= BGW_JIT_API_1_3)
	{
		/* the worker's process id; NULL while none runs */
		nulls[i] = (snap.worker_pid == 0);
		values[i++] = Int32GetDatum(snap.worker_pid);
		/* when the count buf_backend is derived from was last read */
		values[i] = timestamp_or_null(snap.backend_read_at, &nulls[i]);
		i++;
		values[i++] = Int64GetDatum(snap.counters.buf_wal_deferred);
	}
	Assert(i == tupdesc->natts);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
bgw_jit_stats(PG_FUNCTION_ARGS)
{
	return stats_internal(fcinfo, BGW_JIT_API_1_0);
}

Datum
bgw_jit_stats_1_1(PG_FUNCTION_ARGS)
{
	return stats_internal(fcinfo, BGW_JIT_API_1_1);
}

Datum
bgw_jit_stats_1_2(PG_FUNCTION_ARGS)
{
	return stats_internal(fcinfo, BGW_JIT_API_1_2);
}

Datum
bgw_jit_stats_1_3(PG_FUNCTION_ARGS)
{
	return stats_internal(fcinfo, BGW_JIT_API_1_3);
}

/* One history row, in the columns of 'api'. */
static void
put_history_row(ReturnSetInfo *rsinfo, const BgwJitCycle *e, BgwJitApi api)
{
	Datum		values[HISTORY_COLS_MAX];
	bool		nulls[HISTORY_COLS_MAX];
	int			i = 0;

	memset(nulls, 0, sizeof(nulls));
	values[i++] = Int64GetDatum(e->cycle);
	values[i++] = TimestampTzGetDatum(e->at);
	values[i++] = CStringGetTextDatum(bgw_jit_strategy_name(e->strategy));
	values[i++] = Int64GetDatum(e->recent_alloc);
	values[i++] = Int64GetDatum(e->alloc_reported);
	values[i++] = Int64GetDatum(e->strategy_delta);
	values[i++] = Float8GetDatum(e->smoothed_alloc);
	values[i++] = Float8GetDatum(e->smoothed_density);
	values[i++] = Int32GetDatum(e->upcoming_alloc_est);
	values[i++] = Int32GetDatum(e->bufs_ahead);
	values[i++] = Int32GetDatum(e->scanned);
	values[i++] = Int32GetDatum(e->written);
	values[i++] = Int32GetDatum(e->all_written);
	values[i++] = Int32GetDatum(e->reusable_found);
	/* 1.0 called these useful and wasted */
	values[i++] = Int32GetDatum(e->evicted);
	values[i++] = Int32GetDatum(e->redirtied);
	values[i++] = BoolGetDatum(e->lapped);
	values[i++] = BoolGetDatum(e->hit_maxpages);
	values[i++] = Int64GetDatum(e->cpu_us);
	if (api >= BGW_JIT_API_1_1)
	{
		values[i++] = Int64GetDatum(e->elapsed_us);
		values[i++] = Int64GetDatum(e->overrun);
		values[i++] = Float8GetDatum(e->surprise);
		values[i++] = Float8GetDatum(e->margin);
		values[i++] = Float8GetDatum(e->hand_rate);
		values[i++] = Int32GetDatum(e->lead_target);
		values[i++] = Int32GetDatum(e->sleep_ms);
		values[i++] = BoolGetDatum(e->woken);
	}
	if (api >= BGW_JIT_API_1_2)
		values[i++] = Int32GetDatum(e->combined);
	if (api >= BGW_JIT_API_1_3)
	{
		values[i++] = BoolGetDatum(e->sliced);
		values[i++] = BoolGetDatum(e->restarted);
		values[i++] = Float8GetDatum(e->misses);
		values[i++] = Float8GetDatum(e->write_rate);
		nulls[i] = (e->backend_writes < 0);
		values[i++] = Int64GetDatum(e->backend_writes);
		values[i++] = Int32GetDatum(e->wal_deferred);
	}
	Assert(i == rsinfo->setDesc->natts);

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * bgw_jit_history() - the cycles kept in the ring, oldest first, as they
 * were when the call began.  Copied in chunks, each under a short hold of
 * the lock; a reset in between ends the result early.
 */
static Datum
history_internal(FunctionCallInfo fcinfo, BgwJitApi api)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BgwJitShared *s;
	BgwJitCycle *chunk;
	uint64		generation;
	uint64		next = 0;
	uint64		end;

	bgw_jit_check_loaded();
	s = bgw_jit_shared;

	InitMaterializedSRF(fcinfo, 0);
	check_result_columns(rsinfo->setDesc, "bgw_jit_history",
						 api >= BGW_JIT_API_1_3 ? HISTORY_COLS_1_3 :
						 api >= BGW_JIT_API_1_2 ? HISTORY_COLS_1_2 :
						 api >= BGW_JIT_API_1_1 ? HISTORY_COLS_1_1 : HISTORY_COLS_1_0);

	chunk = palloc(sizeof(BgwJitCycle) * HISTORY_CHUNK);

	LWLockAcquire(s->lock, LW_SHARED);
	generation = s->reset_generation;
	end = s->history_count;
	LWLockRelease(s->lock);

	for (;;)
	{
		int			n = 0;

		CHECK_FOR_INTERRUPTS();

		LWLockAcquire(s->lock, LW_SHARED);
		if (s->reset_generation == generation)
			n = bgw_jit_history_read(s, &next, end, chunk, HISTORY_CHUNK);
		LWLockRelease(s->lock);

		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			put_history_row(rsinfo, &chunk[i], api);
	}

	pfree(chunk);
	return (Datum) 0;
}

Datum
bgw_jit_history(PG_FUNCTION_ARGS)
{
	return history_internal(fcinfo, BGW_JIT_API_1_0);
}

Datum
bgw_jit_history_1_1(PG_FUNCTION_ARGS)
{
	return history_internal(fcinfo, BGW_JIT_API_1_1);
}

Datum
bgw_jit_history_1_2(PG_FUNCTION_ARGS)
{
	return history_internal(fcinfo, BGW_JIT_API_1_2);
}

Datum
bgw_jit_history_1_3(PG_FUNCTION_ARGS)
{
	return history_internal(fcinfo, BGW_JIT_API_1_3);
}

/*
 * bgw_jit_bgwriter(stats_reset) - the worker's share of pg_stat_bgwriter's
 * statistics period that began at 'stats_reset' (pg_stat_bgwriter's
 * column of that name), for the bgw_jit_bgwriter view (new in 1.2):
 * buffers_clean, its writes in the period; maxwritten_clean, its cycles
 * stopped by the page cap or the write budget; buffers_backend, its
 * writes that pg_stat_bgwriter.buffers_backend has absorbed (15; NULL
 * from 16, where pg_stat_bgwriter has no such column).  All 0 for a
 * period the worker has not seen yet, i.e. just after
 * pg_stat_reset_shared('bgwriter'): nothing of it is the worker's yet.
 * Not a function of bgw_jit_reset()'s period.
 */
Datum
bgw_jit_bgwriter_1_2(PG_FUNCTION_ARGS)
{
	BgwJitShared *s;
	BgwJitBgwriterShare b;
	TimestampTz since;
	TupleDesc	tupdesc;
	Datum		values[BGWRITER_COLS_1_2];
	bool		nulls[BGWRITER_COLS_1_2];
	uint64		written = 0;
	uint64		maxwritten = 0;
	uint64		absorbed = 0;

	bgw_jit_check_loaded();
	s = bgw_jit_shared;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	check_result_columns(tupdesc, "bgw_jit_bgwriter", BGWRITER_COLS_1_2);

	/* a NULL stats_reset is a period never reset (the worker's 0) */
	since = PG_ARGISNULL(0) ? 0 : PG_GETARG_TIMESTAMPTZ(0);

	LWLockAcquire(s->lock, LW_SHARED);
	b = s->bgwriter;
	LWLockRelease(s->lock);

	if (b.period_reset == since)
	{
		written = b.written - b.period_written;
		maxwritten = b.maxwritten - b.period_maxwritten;
		absorbed = b.absorbed - b.period_absorbed;
	}

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int64GetDatum(written);
	values[1] = Int64GetDatum(maxwritten);
	values[2] = Int64GetDatum(absorbed);
	nulls[2] = !COMPAT_BACKEND_WRITES_INCLUDE_OWN;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * bgw_jit_core_bgwriter() - the server's own pg_stat_bgwriter figures in
 * the same columns on every version, for the bgw_jit_bgwriter view (new
 * in 1.3): 15's columns of pg_stat_bgwriter; from 17 the checkpoint ones
 * from pg_stat_checkpointer and buffers_backend, buffers_backend_fsync
 * NULL (bgw_jit_compat_bgwriter_stats()).  So that no SQL object of the
 * extension names a column of a system view, which pg_upgrade to a version without
 * it could not restore.  Needs nothing of the worker: it works without
 * the library preloaded.
 */
Datum
bgw_jit_core_bgwriter(PG_FUNCTION_ARGS)
{
	CompatBgwriterStats b;
	TupleDesc	tupdesc;
	Datum		values[CORE_BGWRITER_COLS];
	bool		nulls[CORE_BGWRITER_COLS];
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	check_result_columns(tupdesc, "bgw_jit_core_bgwriter", CORE_BGWRITER_COLS);

	bgw_jit_compat_bgwriter_stats(&b);

	memset(nulls, 0, sizeof(nulls));
	values[i++] = Int64GetDatum(b.checkpoints_timed);
	values[i++] = Int64GetDatum(b.checkpoints_req);
	values[i++] = Float8GetDatum(b.checkpoint_write_time);
	values[i++] = Float8GetDatum(b.checkpoint_sync_time);
	values[i++] = Int64GetDatum(b.buffers_checkpoint);
	values[i++] = Int64GetDatum(b.buffers_clean);
	values[i++] = Int64GetDatum(b.maxwritten_clean);
	nulls[i] = !b.has_backend;
	values[i++] = Int64GetDatum(b.buffers_backend);
	nulls[i] = !b.has_backend;
	values[i++] = Int64GetDatum(b.buffers_backend_fsync);
	values[i++] = Int64GetDatum(b.buffers_alloc);
	values[i++] = TimestampTzGetDatum(b.stats_reset);
	Assert(i == CORE_BGWRITER_COLS);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * bgw_jit_reset() - zero counters and history.  EXECUTE is revoked from
 * PUBLIC by the install script; granting it is the way to delegate.
 */
Datum
bgw_jit_reset(PG_FUNCTION_ARGS)
{
	bgw_jit_check_loaded();
	bgw_jit_reset_counters();
	PG_RETURN_VOID();
}

/* Arguments of bgw_jit_replay(), in declaration order. */
enum
{
	REPLAY_ARG_ALLOCS,
	REPLAY_ARG_DELTAS,
	REPLAY_ARG_AHEAD,
	REPLAY_ARG_SCANNED,
	REPLAY_ARG_REUSABLE,
	REPLAY_ARG_MULTIPLIER,
	REPLAY_ARG_SMOOTHING,
	REPLAY_ARG_DELAY,
	REPLAY_ARG_SCAN_WHOLE,
	REPLAY_ARG_NBUFFERS,
	REPLAY_ARG_START_ALLOC,
	REPLAY_ARG_START_DENSITY
};

static const char *const replay_arg_names[] = {
	"recent_allocs", "strategy_deltas", "bufs_ahead", "scanned",
	"reusable_found", "lru_multiplier", "smoothing_samples", "delay",
	"scan_whole_pool_seconds", "nbuffers", "start_smoothed_alloc",
	"start_smoothed_density"
};

/*
 * Deconstruct a one-dimensional int8 array argument without NULL elements
 * whose values lie in [0, max].  An absent (SQL NULL) optional array gives
 * NULL; *len must match the length already set, or sets it when -1.
 * names[] holds the function's argument names, the first array first.
 */
static int64 *
replay_array_arg(FunctionCallInfo fcinfo, const char *const *names,
				 int argno, bool required, int64 max, int *len)
{
	const char *name = names[argno];
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n;
	int64	   *result;

	if (PG_ARGISNULL(argno))
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", name)));
		return NULL;
	}

	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", name)));

	deconstruct_array(arr, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &elems, &elem_nulls, &n);

	if (*len < 0)
		*len = n;
	else if (n != *len)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s has %d elements but %s has %d",
						name, n, names[0], *len),
				 errhint("Give one element per cycle in every array.")));

	result = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		int64		v = DatumGetInt64(elems[i]);

		if (elem_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain nulls", name)));
		if (v < 0 || v > max)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s element %d is out of range: " INT64_FORMAT,
							name, i + 1, v),
					 errdetail("Values must lie between 0 and " INT64_FORMAT ".",
							   max)));
		result[i] = v;
	}
	return result;
}

/* A scalar argument that must be given and lie in [min, max]. */
static double
replay_scalar_arg(FunctionCallInfo fcinfo, const char *const *names,
				  int argno, bool is_int, double min, double max)
{
	const char *name = names[argno];
	double		v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	v = is_int ? (double) PG_GETARG_INT32(argno) : PG_GETARG_FLOAT8(argno);
	if (!(v >= min && v <= max))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range: %.15g", name, v),
				 errdetail("Valid values lie between %.15g and %.15g.", min, max)));
	return v;
}

/*
 * bgw_jit_replay() - run the estimator over given per-cycle inputs.
 *
 * With the optional scan results (scanned, reusable_found) it reproduces
 * the worker's cycles exactly; without them it shows what the estimate
 * alone would have been under other settings.  Pure arithmetic: it works
 * without the library preloaded.  STABLE rather than IMMUTABLE, as a NULL
 * nbuffers means this server's shared_buffers.
 */
Datum
bgw_jit_replay(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *const *names = replay_arg_names;
	JitParams	params;
	JitState	state;
	int			ncycles = -1;
	int64	   *allocs;
	int64	   *deltas;
	int64	   *ahead;
	int64	   *scanned;
	int64	   *reusable;

	allocs = replay_array_arg(fcinfo, names, REPLAY_ARG_ALLOCS, true,
							  PG_UINT32_MAX, &ncycles);
	deltas = replay_array_arg(fcinfo, names, REPLAY_ARG_DELTAS, true,
							  PG_INT64_MAX, &ncycles);
	ahead = replay_array_arg(fcinfo, names, REPLAY_ARG_AHEAD, false,
							 PG_INT32_MAX, &ncycles);
	scanned = replay_array_arg(fcinfo, names, REPLAY_ARG_SCANNED, false,
							   PG_INT32_MAX, &ncycles);
	reusable = replay_array_arg(fcinfo, names, REPLAY_ARG_REUSABLE, false,
								PG_INT32_MAX, &ncycles);
	if ((scanned == NULL) != (reusable == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scanned and reusable_found must be given together")));

	params.multiplier = replay_scalar_arg(fcinfo, names, REPLAY_ARG_MULTIPLIER,
										  false, 0, 10);
	params.smoothing_samples = replay_scalar_arg(fcinfo, names, REPLAY_ARG_SMOOTHING,
												 true, 1, 1000);
	params.delay_ms = replay_scalar_arg(fcinfo, names, REPLAY_ARG_DELAY,
										true, 10, 10000);
	params.scan_whole_pool_seconds = replay_scalar_arg(fcinfo, names,
													   REPLAY_ARG_SCAN_WHOLE,
													   true, 1, 3600);
	params.nbuffers = PG_ARGISNULL(REPLAY_ARG_NBUFFERS) ? NBuffers :
		replay_scalar_arg(fcinfo, names, REPLAY_ARG_NBUFFERS, true, 16, INT_MAX / 2);

	state.smoothed_alloc = replay_scalar_arg(fcinfo, names, REPLAY_ARG_START_ALLOC,
											 false, 0, PG_UINT32_MAX);
	state.smoothed_density = replay_scalar_arg(fcinfo, names, REPLAY_ARG_START_DENSITY,
											   false, 1e-6, 1e9);

	if (ahead)
	{
		for (int i = 0; i < ncycles; i++)
			if (ahead[i] > params.nbuffers)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("bufs_ahead element %d exceeds nbuffers (%d)",
								i + 1, params.nbuffers)));
	}

	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < ncycles; i++)
	{
		JitEstimate est;
		Datum		values[REPLAY_COLS];
		bool		nulls[REPLAY_COLS];
		int			c = 0;

		CHECK_FOR_INTERRUPTS();

		bgw_jit_estimate(&state, &params, (uint32) allocs[i], deltas[i],
						 ahead ? (int) ahead[i] : 0, &est);

		/* The published figures are taken after the density refinement. */
		if (scanned)
			bgw_jit_refine_density(&state, &params, scanned[i], reusable[i]);

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(i + 1);
		values[c++] = Float8GetDatum(state.smoothed_alloc);
		values[c++] = Float8GetDatum(state.smoothed_density);
		values[c++] = Int32GetDatum(est.reusable_buffers_est);
		values[c++] = Int32GetDatum(est.min_scan_buffers);
		values[c++] = Int32GetDatum(est.upcoming_alloc_est);
		Assert(c == REPLAY_COLS);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	return (Datum) 0;
}

/* Arguments of bgw_jit_replay_pacer(), in declaration order. */
enum
{
	PACER_ARG_ELAPSED,
	PACER_ARG_MOVED,
	PACER_ARG_WRITTEN,
	PACER_ARG_EVICTED,
	PACER_ARG_REDIRTIED,
	PACER_ARG_WOKEN,
	PACER_ARG_MULTIPLIER,
	PACER_ARG_PACING,
	PACER_ARG_DELAY,
	PACER_ARG_SMOOTHING,
	PACER_ARG_SCAN_WHOLE,
	PACER_ARG_NBUFFERS,
	PACER_ARG_RATE,
	PACER_ARG_MAXPAGES,
	PACER_ARG_START_RATE,
	PACER_ARG_START_MARGIN,
	PACER_ARG_START_PLANNED,
	/* from 1.3 */
	PACER_ARG_OVERRUN,
	PACER_ARG_ALLOC,
	PACER_ARG_BACKEND,
	PACER_ARG_RESTARTED,
	PACER_ARG_SLICED,
	PACER_ARG_START_BACKEND
};

static const char *const pacer_arg_names[] = {
	"elapsed_us", "hand_moved", "written", "evicted", "redirtied", "woken",
	"lru_multiplier", "pacing", "delay", "smoothing_samples",
	"scan_whole_pool_seconds", "nbuffers", "max_write_rate", "lru_maxpages",
	"start_hand_rate", "start_margin", "start_planned_ms",
	"overrun", "recent_alloc", "backend_writes", "restarted", "sliced",
	"start_backend_writes"
};

/* A text argument that must be given. */
static char *
replay_text_arg(FunctionCallInfo fcinfo, const char *const *names, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", names[argno])));
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * Optional boolean array argument 'argno' of ncycles elements, or NULL.
 */
static bool *
replay_bool_array_arg(FunctionCallInfo fcinfo, const char *const *names,
					  int argno, int ncycles)
{
	const char *name = names[argno];
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elem_nulls;
	bool	   *result;
	int			n;

	if (PG_ARGISNULL(argno))
		return NULL;
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", name)));
	deconstruct_array(arr, BOOLOID, 1, true, TYPALIGN_CHAR,
					  &elems, &elem_nulls, &n);
	if (n != ncycles)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s has %d elements but %s has %d",
						name, n, names[0], ncycles),
				 errhint("Give one element per cycle in every array.")));
	result = palloc(sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (elem_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain nulls", name)));
		result[i] = DatumGetBool(elems[i]);
	}
	return result;
}

/*
 * bgw_jit_replay_pacer() - run the self-pacing controller over given
 * per-cycle measurements: what the worker decided, or would have decided
 * under other settings.  Fed a stretch of bgw_jit_history (with evicted
 * and redirtied taken from the cycle before, which the worker judged
 * before planning), and started from the state the row before it shows,
 * it reproduces the recorded hand_rate, margin, sleep_ms and lead_target.
 * Pure arithmetic: it works without the library preloaded.
 */
Datum
bgw_jit_replay_pacer(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *const *names = pacer_arg_names;
	PacerParams params;
	PacerState	state;
	int			ncycles = -1;
	int64	   *elapsed;
	int64	   *moved;
	int64	   *written;
	int64	   *evicted;
	int64	   *redirtied;
	int64	   *overrun = NULL;
	int64	   *alloc = NULL;
	int64	   *backend = NULL;
	bool	   *woken;
	bool	   *restarted = NULL;
	char	   *text;

	elapsed = replay_array_arg(fcinfo, names, PACER_ARG_ELAPSED, true,
							   PG_INT64_MAX, &ncycles);
	moved = replay_array_arg(fcinfo, names, PACER_ARG_MOVED, true,
							 PG_INT64_MAX, &ncycles);
	written = replay_array_arg(fcinfo, names, PACER_ARG_WRITTEN, false,
							   PG_INT32_MAX, &ncycles);
	evicted = replay_array_arg(fcinfo, names, PACER_ARG_EVICTED, false,
							   PG_INT32_MAX, &ncycles);
	redirtied = replay_array_arg(fcinfo, names, PACER_ARG_REDIRTIED, false,
								 PG_INT32_MAX, &ncycles);
	woken = replay_bool_array_arg(fcinfo, names, PACER_ARG_WOKEN, ncycles);
	if (PG_NARGS() > PACER_ARG_SLICED)
	{
		overrun = replay_array_arg(fcinfo, names, PACER_ARG_OVERRUN, false,
								   PG_INT64_MAX, &ncycles);
		alloc = replay_array_arg(fcinfo, names, PACER_ARG_ALLOC, false,
								 PG_UINT32_MAX, &ncycles);
		backend = replay_array_arg(fcinfo, names, PACER_ARG_BACKEND, false,
								   PG_INT64_MAX, &ncycles);
		restarted = replay_bool_array_arg(fcinfo, names, PACER_ARG_RESTARTED,
										  ncycles);
		/* checked, no longer used: a cycle's slices share its plan */
		(void) replay_bool_array_arg(fcinfo, names, PACER_ARG_SLICED,
									 ncycles);
	}

	text = replay_text_arg(fcinfo, names, PACER_ARG_MULTIPLIER);
	if (!bgw_jit_parse_multiplier(text, &params.margin))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lru_multiplier: \"%s\"", text),
				 errhint("Give \"auto\" or a number between 0 and 10.")));
	text = replay_text_arg(fcinfo, names, PACER_ARG_PACING);
	if (pg_strcasecmp(text, "auto") != 0 && pg_strcasecmp(text, "fixed") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid pacing: \"%s\"", text),
				 errhint("Give \"auto\" or \"fixed\".")));
	params.self_paced = (pg_strcasecmp(text, "auto") == 0);
	params.max_sleep_ms = replay_scalar_arg(fcinfo, names, PACER_ARG_DELAY,
											true, 10, 10000);
	params.smoothing_samples = replay_scalar_arg(fcinfo, names,
												 PACER_ARG_SMOOTHING,
												 true, 1, 1000);
	params.scan_whole_pool_seconds = replay_scalar_arg(fcinfo, names,
													   PACER_ARG_SCAN_WHOLE,
													   true, 1, 3600);
	params.nbuffers = PG_ARGISNULL(PACER_ARG_NBUFFERS) ? NBuffers :
		replay_scalar_arg(fcinfo, names, PACER_ARG_NBUFFERS,
						  true, 16, INT_MAX / 2);
	params.write_rate = replay_scalar_arg(fcinfo, names, PACER_ARG_RATE,
										  false, 0,
										  BGW_JIT_MAX_WRITE_RATE_MAX) *
		(1024.0 * 1024.0 / BLCKSZ);
	params.maxpages = replay_scalar_arg(fcinfo, names, PACER_ARG_MAXPAGES,
										true, -1, INT_MAX / 2);

	bgw_jit_pacer_init(&state, &params);
	state.hand_rate = replay_scalar_arg(fcinfo, names, PACER_ARG_START_RATE,
										false, 0, 1e12);
	state.margin = replay_scalar_arg(fcinfo, names, PACER_ARG_START_MARGIN,
									 false, PACER_MARGIN_MIN,
									 PACER_MARGIN_MAX);
	state.planned_ms = replay_scalar_arg(fcinfo, names,
										 PACER_ARG_START_PLANNED,
										 false, 0, 1e7);
	/* the start row's plan: was its lead already at its cap? */
	state.lead_saturated = (state.planned_ms > 0 &&
							state.planned_ms <= PACER_MIN_SLEEP_MS &&
							state.margin * state.hand_rate *
							state.planned_ms / 1000.0 >=
							PACER_LEAD_MAX_FRACTION * params.nbuffers);
	/* the backends' writes as the start row saw them, right after a change */
	if (PG_NARGS() > PACER_ARG_START_BACKEND &&
		!PG_ARGISNULL(PACER_ARG_START_BACKEND))
	{
		int64		seen = PG_GETARG_INT64(PACER_ARG_START_BACKEND);

		if (seen < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("start_backend_writes must not be negative")));
		state.backend_valid = true;
		state.backend_seen = (uint64) seen;
	}

	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < ncycles; i++)
	{
		PacerInput	in;
		PacerPlan	plan;
		Datum		values[REPLAY_PACER_COLS];
		bool		nulls[REPLAY_PACER_COLS];
		int			c = 0;

		CHECK_FOR_INTERRUPTS();

		if ((woken && woken[i]) || (restarted && restarted[i]))
			bgw_jit_pacer_restart(&state);
		in.elapsed_us = elapsed[i];
		in.hand_moved = moved[i];
		in.evicted = evicted ? (int) evicted[i] : 0;
		in.redirtied = redirtied ? (int) redirtied[i] : 0;
		in.overrun = overrun ? overrun[i] : 0;
		in.alloc = alloc ? (uint32) alloc[i] : 0;
		in.backend_known = (backend != NULL);
		in.backend_writes = backend ? (uint64) backend[i] : 0;
		bgw_jit_pacer_plan(&state, &params, &in, &plan);
		if (written)
			bgw_jit_pacer_charge(&state, &params, (int) written[i]);

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(i + 1);
		values[c++] = Float8GetDatum(state.hand_rate);
		values[c++] = Float8GetDatum(plan.surprise);
		values[c++] = Float8GetDatum(plan.margin);
		values[c++] = Int32GetDatum(plan.sleep_ms);
		values[c++] = Int32GetDatum(plan.lead_target);
		values[c++] = Int32GetDatum(plan.min_scan);
		values[c++] = Int32GetDatum(plan.write_budget);
		/* from 1.3 */
		values[c++] = Float8GetDatum(plan.misses);
		values[c++] = Int32GetDatum(plan.idle_pages);
		values[c++] = Float8GetDatum(plan.write_rate);
		Assert(c == REPLAY_PACER_COLS);

		/* (earlier versions' SQL asks for fewer columns) */
		Assert(rsinfo->setDesc->natts <= REPLAY_PACER_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	return (Datum) 0;
}
