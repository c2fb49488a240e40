/*-------------------------------------------------------------------------
 *
 * errors.h
 *		Recovery from an ERROR, shared by bgw_jit's two workers.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_ERRORS_H
#define BGW_JIT_ERRORS_H

/* After an ERROR a worker pauses this long, as core's writer does. */
#define BGW_JIT_ERROR_SLEEP_MS	1000

/* A distinct error is logged at most once in this many seconds. */
#define BGW_JIT_ERROR_LOG_INTERVAL_S	60
#ifdef BGW_JIT_FAULT_INJECTION
#define BGW_JIT_ERROR_LOG_INTERVAL	bgw_jit_error_log_interval
#else
#define BGW_JIT_ERROR_LOG_INTERVAL	BGW_JIT_ERROR_LOG_INTERVAL_S
#endif

extern void bgw_jit_error_cleanup(const char *what);
extern void bgw_jit_error_pause(void);

#endif							/* BGW_JIT_ERRORS_H */
