/*-------------------------------------------------------------------------
 *
 * flusher.h
 *		The WAL flusher: WAL flushes on the cleaner's behalf.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_FLUSHER_H
#define BGW_JIT_FLUSHER_H

#include "access/xlogdefs.h"

extern bool bgw_jit_wal_flusher_running(void);
extern bool bgw_jit_request_wal_flush(XLogRecPtr lsn);
extern bool bgw_jit_wal_flush_pending(XLogRecPtr lsn);

#endif							/* BGW_JIT_FLUSHER_H */
