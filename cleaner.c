/*-------------------------------------------------------------------------
 *
 * cleaner.c
 *		Write one shared buffer the way the built-in LRU cleaner does.
 *
 * Core's SyncOneBuffer() is static, so this uses exported calls: copy the
 * tag under the header lock, pin with ReadRecentBuffer() (which re-checks
 * the tag and, for a first pin, leaves the usage count alone), then
 * FlushOneBuffer() under a share content lock.  Between our header unlock
 * and the pin a backend may use the page again; the cost is at most one
 * extra write, never a wrong one.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/instrument.h"
#include "storage/bufmgr.h"
#include "storage/buf_internals.h"

#include "bgw_jit.h"
#include "compat.h"

#define BUF_REUSABLE_STATE(s) \
	(BUF_STATE_GET_REFCOUNT(s) == 0 && BUF_STATE_GET_USAGECOUNT(s) == 0)
#define BUF_VALID_DIRTY(s) \
	(((s) & (BM_VALID | BM_DIRTY)) == (BM_VALID | BM_DIRTY))

/*
 * Examine shared buffer 'buf_id' (0-based) and write it if it is valid,
 * dirty, unpinned and has usage count 0.  Returns CLEANER_* flags.  The
 * caller must have enlarged CurrentResourceOwner's buffer array.
 */
int
cleaner_sync_buffer(int buf_id, WritebackContext *wb_context)
{
	BufferDesc *desc = GetBufferDescriptor(buf_id);
	Buffer		buffer = buf_id + 1;
	uint32		state;
	BufferTag	tag;
	int64		written_before;
	bool		wrote;

	/*
	 * Most buffers under load are pinned, recently used or clean: decide
	 * those from an unlocked read and take the header spinlock only for
	 * likely candidates.
	 */
	state = pg_atomic_read_u32(&desc->state);
	if (!BUF_REUSABLE_STATE(state))
		return 0;
	if (!BUF_VALID_DIRTY(state))
		return CLEANER_REUSABLE;

	state = LockBufHdr(desc);
	if (!BUF_REUSABLE_STATE(state))
	{
		UnlockBufHdr(desc, state);
		return 0;
	}
	if (!BUF_VALID_DIRTY(state))
	{
		UnlockBufHdr(desc, state);
		return CLEANER_REUSABLE;
	}
	tag = desc->tag;
	UnlockBufHdr(desc, state);

	/* It was evicted and reused in between: no longer ours to judge. */
	if (!compat_pin_if_tag(&tag, buffer))
		return 0;

	/* Used again before we pinned it: writing now would likely be wasted. */
	if (BUF_STATE_GET_USAGECOUNT(pg_atomic_read_u32(&desc->state)) != 0)
	{
		ReleaseBuffer(buffer);
		return 0;
	}

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
#ifdef BGW_JIT_FAULT_INJECTION
	if (bgw_jit_inject_error)
		ereport(ERROR,
				(errmsg("bgw_jit: injected error with buffer %d pinned and locked",
						buffer)));
#endif
	written_before = pgBufferUsage.shared_blks_written;
	FlushOneBuffer(buffer);
	wrote = pgBufferUsage.shared_blks_written != written_before;
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	ReleaseBuffer(buffer);

	if (!wrote)
		return CLEANER_REUSABLE;

	ScheduleBufferTagForWriteback(wb_context, &tag);
	return CLEANER_REUSABLE | CLEANER_WRITTEN;
}
