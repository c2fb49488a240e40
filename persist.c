/*-------------------------------------------------------------------------
 *
 * persist.c
 *		Keep bgw_jit's statistics across a clean restart.
 *
 * Like pg_stat_statements: the postmaster writes the counters and history
 * to pg_stat/bgw_jit.stat when it exits after a clean shutdown, and reads
 * and removes the file when it creates shared memory.  After a crash or
 * an immediate shutdown nothing is written, so the statistics start from
 * zero, as core's do.  A file that is not ours, of another format version,
 * or that fails its CRC is ignored with a LOG message, never trusted.
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

#include "bgw_jit.h"

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

static bool clean_shutdown(void);

/* History cycles handled at a time, so that no copy of the ring is needed. */
#define CYCLE_CHUNK		256

/*
 * on_shmem_exit callback of the postmaster.  Every other process has
 * exited by now, so no lock is needed.
 */
void
bgw_jit_stats_save(int code, Datum arg)
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
	INIT_CRC32C(hdr.crc);
	COMP_CRC32C(hdr.crc, &body, sizeof(body));
	next = 0;
	while ((n = bgw_jit_history_read(s, &next, s->history_count,
									 chunk, CYCLE_CHUNK)) > 0)
		COMP_CRC32C(hdr.crc, chunk, sizeof(BgwJitCycle) * n);
	FIN_CRC32C(hdr.crc);

	file = AllocateFile(STATS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
		goto error;
	if (fwrite(&hdr, sizeof(hdr), 1, file) != 1 ||
		fwrite(&body, sizeof(body), 1, file) != 1)
		goto error;
	next = 0;
	while ((n = bgw_jit_history_read(s, &next, s->history_count,
									 chunk, CYCLE_CHUNK)) > 0)
	{
		if (fwrite(chunk, sizeof(BgwJitCycle), n, file) != n)
			goto error;
	}

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
 * Restore what bgw_jit_stats_save() wrote into freshly zeroed shared
 * memory, then remove the file so that a crash cannot resurrect it.
 */
void
bgw_jit_stats_load(BgwJitShared *s)
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
