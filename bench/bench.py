#!/usr/bin/env python3
"""bench/bench.py - the arithmetic half of bench/run (stdlib only).

bench/run drives the server, pgbench and the samplers and leaves each
measured run's raw files in a directory; this program turns them into
figures, per-run time series, results.csv, summary.md and the plots.
Keeping the shell side free of arithmetic means every figure is computed
in one place, the same way for every configuration.

Subcommands (all called by bench/run):
  configs FILE SELECTION      resolve names/@groups to configuration names
  config-lines FILE NAME      the postgresql.conf lines of a configuration
  config-info FILE NAME       its human description (seed 000's "info")
  preload-line LIST           shared_preload_libraries = LIST, composed
  run-figures RAWDIR OUTDIR   one measured run -> results.csv + series
  step-figures RAWDIR OUTDIR  one load-step run -> step.csv + series
  idle-figures RAWDIR OUTDIR  one idle window -> idle.csv
  report OUTDIR               summary.md and PNGs; exit 1 if anything failed
"""

import csv
import glob
import math
import os
import re
import statistics
import subprocess
import sys
from datetime import datetime, timezone

# ---------------------------------------------------------------------------
# small helpers


def die(msg):
    print("bench.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_env(path):
    """KEY=VALUE lines (value taken verbatim after the first '=')."""
    env = {}
    if not os.path.exists(path):
        return env
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v
    return env


def read_psql_csv(path):
    """First data row of a `psql --csv` output file, or {}."""
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[0] if rows else {}


def num(v):
    """float, or None for '', None, 'NaN' and junk."""
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return None if (isinstance(v, float) and math.isnan(v)) else v
    try:
        x = float(v)
    except ValueError:
        return None
    return None if math.isnan(x) else x


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=0, none="–"):
    if x is None:
        return none
    if digits == 0:
        return str(int(round(x)))
    return "%.*f" % (digits, x)


def append_row(path, columns, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: ("" if row.get(k) is None else row.get(k))
                    for k in columns})


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None else
                        (round(v, 6) if isinstance(v, float) else v)
                        for v in r])


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------------
# configs.conf


def parse_configs(path):
    configs, groups, cur = {}, {}, None
    order = []
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = "%s:%d" % (path, lineno)
            if line.startswith("["):
                m = re.match(r"\[([A-Za-z0-9_.-]+)\]\s*(.*)$", line)
                if not m:
                    die(where + ": bad section header: " + line)
                name = m.group(1)
                if name in configs:
                    die(where + ": configuration defined twice: " + name)
                configs[name] = {"info": m.group(2).strip() or name,
                                 "lines": []}
                order.append(name)
                cur = name
            elif line.startswith("@"):
                m = re.match(r"@([A-Za-z0-9_.-]+)\s*=\s*(.*)$", line)
                if not m:
                    die(where + ": bad group line: " + line)
                groups[m.group(1)] = m.group(2).split()
                cur = None
            else:
                if cur is None:
                    die(where + ": setting outside a [configuration]: " + line)
                configs[cur]["lines"].append(line)
    return configs, groups, order


def resolve(configs, groups, selection):
    out = []

    def add(tok, seen):
        name = tok[1:] if tok.startswith("@") else tok
        if not tok.startswith("@") and tok in configs:
            if tok not in out:
                out.append(tok)
        elif name in groups:
            if name in seen:
                die("group @%s includes itself" % name)
            for t in groups[name]:
                add(t, seen | {name})
        else:
            die("unknown configuration or group: %s (known: %s; groups: %s)"
                % (tok, " ".join(configs), " ".join("@" + g for g in groups)))

    for tok in re.split(r"[,\s]+", selection.strip()):
        if tok:
            add(tok, frozenset())
    if not out:
        die("no configuration selected")
    return out


def cmd_configs(args):
    configs, groups, _ = parse_configs(args[0])
    print("\n".join(resolve(configs, groups, args[1])))


# Preloaded in every configuration: the backends' write count comes from
# it, so that no figure of cleaner_pct_indep is bgw_jit's own.
ALWAYS_PRELOADED = ["pg_stat_statements"]
PRELOAD_RE = re.compile(r"^\s*shared_preload_libraries\s*=?\s*(.*?)\s*(#.*)?$")


def preload_line(value):
    """shared_preload_libraries = VALUE with ALWAYS_PRELOADED in front:
    a configuration's '' means 'without bgw_jit', not 'nothing'."""
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'":
        v = v[1:-1]
    libs = [x.strip() for x in v.split(",") if x.strip()]
    libs = ALWAYS_PRELOADED + [x for x in libs if x not in ALWAYS_PRELOADED]
    return "shared_preload_libraries = '%s'" % ",".join(libs)


def cmd_preload_line(args):
    print(preload_line(args[0]))


def cmd_config_lines(args):
    configs, _, _ = parse_configs(args[0])
    if args[1] not in configs:
        die("unknown configuration: " + args[1])
    out = []
    for line in configs[args[1]]["lines"]:
        m = PRELOAD_RE.match(line)
        out.append(preload_line(m.group(1)) if m else line)
    print("\n".join(out))


def cmd_config_info(args):
    configs, _, _ = parse_configs(args[0])
    if args[1] not in configs:
        die("unknown configuration: " + args[1])
    print(configs[args[1]]["info"])


# ---------------------------------------------------------------------------
# raw files of one run


def parse_pgbench(rawdir):
    """Summary figures from pgbench's stdout and its per-transaction log."""
    out = {"tps": None, "xacts": None, "failed_xacts": None,
           "lat_mean_ms": None, "lat_p50_ms": None, "lat_p99_ms": None,
           "t0": None, "errors": []}
    path = os.path.join(rawdir, "pgbench.out")
    text = open(path).read() if os.path.exists(path) else ""
    m = re.search(r"^tps = ([\d.]+) \(without initial connection time\)",
                  text, re.M)
    if m:
        out["tps"] = float(m.group(1))
    m = re.search(r"^number of transactions actually processed: (\d+)",
                  text, re.M)
    if m:
        out["xacts"] = int(m.group(1))
    m = re.search(r"^number of failed transactions: (\d+)", text, re.M)
    if m:
        out["failed_xacts"] = int(m.group(1))
    errpath = os.path.join(rawdir, "pgbench.err")
    if os.path.exists(errpath):
        for line in open(errpath):
            if not line.startswith("progress:") and line.strip():
                out["errors"].append(line.strip())

    # client_id xact_no latency_us script_no end_epoch end_us [...]
    lats, starts, failed = [], [], 0
    for logf in glob.glob(os.path.join(rawdir, "pgbench_log.*")):
        with open(logf) as f:
            for line in f:
                p = line.split()
                if len(p) < 6:
                    continue
                try:
                    lat = int(p[2])
                except ValueError:      # "failed" or "skipped"
                    failed += 1
                    continue
                lats.append(lat / 1000.0)
                starts.append(int(p[4]) + int(p[5]) / 1e6 - lat / 1e6)
    if lats:
        lats.sort()
        out["lat_mean_ms"] = sum(lats) / len(lats)
        out["lat_p50_ms"] = lats[max(0, math.ceil(0.50 * len(lats)) - 1)]
        out["lat_p99_ms"] = lats[max(0, math.ceil(0.99 * len(lats)) - 1)]
        out["t0"] = min(starts)
    out["log_xacts"] = len(lats)
    out["log_failed"] = failed
    return out


def parse_progress(rawdir):
    rows = []
    path = os.path.join(rawdir, "pgbench.err")
    if not os.path.exists(path):
        return rows
    pat = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms"
                     r" stddev ([\d.]+|NaN)")
    for line in open(path):
        m = pat.match(line)
        if m:
            rows.append((float(m.group(1)), float(m.group(2)),
                         float(m.group(3)), num(m.group(4))))
    return rows


SAMPLER_COLS = ["t", "buffers_backend", "buffers_clean", "buffers_alloc",
                "jit_buf_clean", "jit_buf_backend", "jit_buf_alloc"]


def parse_sampler(rawdir):
    rows = []
    path = os.path.join(rawdir, "sampler.csv")
    if not os.path.exists(path):
        return rows
    for line in open(path):
        p = line.strip().split(",")
        if len(p) != len(SAMPLER_COLS) or num(p[0]) is None:
            continue
        rows.append({k: num(v) for k, v in zip(SAMPLER_COLS, p)})
    return rows


def trailing_rate(ts, vs, window):
    """Per-second rate of a cumulative counter over a trailing window."""
    out, j = [], 0
    for i in range(len(ts)):
        while j < i and ts[i] - ts[j + 1] >= window:
            j += 1
        dt = ts[i] - ts[j]
        if vs[i] is None or vs[j] is None or dt < 0.5 * window:
            out.append(None)
        else:
            out.append((vs[i] - vs[j]) / dt)
    return out


PAGE = 8192      # BLCKSZ: wchar / PAGE is the pages a process wrote
WRITER_ROLES = tuple("writer%d" % i for i in range(1, 9))
PROC_ROLES = ("jit",) + WRITER_ROLES + ("bgwriter", "checkpointer")
CLEANING_ROLES = ("jit",) + WRITER_ROLES + ("bgwriter",)


def proc_figures(rawdir, meta):
    """/proc reads around a window (proc0.env, proc1.env from bench/run).

    Per process role (jit: bgw_jit's worker, writer1..8: its writers,
    bgwriter: core's background writer, checkpointer): its kernel write count over the window (wchar
    bytes / 8192, which includes any WAL the process flushed itself), its
    write calls (syscw), CPU seconds per second (schedstat's run time, else
    utime + stime), run-queue wait (ms per second), wake-ups
    per second (voluntary + involuntary context switches) and memory at
    the end (kB).  A process that was not running has no entries; one
    that was replaced or vanished during the window is a problem.
    Returns (figures, window seconds, problems).
    """
    p0 = read_env(os.path.join(rawdir, "proc0.env"))
    p1 = read_env(os.path.join(rawdir, "proc1.env"))
    hz = num(meta.get("clk_tck")) or 100
    t0, t1 = num(p0.get("t")), num(p1.get("t"))
    out, problems = {}, []
    if None in (t0, t1) or t1 <= t0:
        return out, (None, None), ["no /proc reads around the window"]
    dt = t1 - t0

    def d(role, key):
        a, b = num(p0.get(role + "_" + key)), num(p1.get(role + "_" + key))
        return None if a is None or b is None else b - a

    for role in PROC_ROLES:
        pid = p0.get(role + "_pid")
        if pid is None:         # not running: it wrote nothing
            out[role + "_wchar_pages"] = out[role + "_syscw"] = 0
            continue
        if p1.get(role + "_pid") != pid or \
                p1.get(role + "_starttime") != p0.get(role + "_starttime"):
            problems.append("%s process %s gone or replaced during the run"
                            % (role, pid))
            continue
        w, u, st = d(role, "wchar"), d(role, "utime"), d(role, "stime")
        run, wait = d(role, "sched_run_ns"), d(role, "sched_wait_ns")
        v, nv = (d(role, "voluntary_ctxt_switches"),
                 d(role, "nonvoluntary_ctxt_switches"))
        out[role + "_wchar_pages"] = None if w is None else w / PAGE
        out[role + "_syscw"] = d(role, "syscw")
        # CPU time: schedstat's, in ns, where the kernel has it; utime +
        # stime is the same total in clock ticks (10 ms), too coarse for
        # an idle worker
        if run is not None:
            out[role + "_cpu_s"] = run / 1e9
        elif None not in (u, st):
            out[role + "_cpu_s"] = (u + st) / hz
        if out.get(role + "_cpu_s") is not None:
            out[role + "_cpu_s_per_s"] = out[role + "_cpu_s"] / dt
        if wait is not None:
            out[role + "_runq_wait_ms_per_s"] = wait / 1e6 / dt
        if None not in (v, nv):
            out[role + "_vcsw_per_s"] = v / dt
            out[role + "_nvcsw_per_s"] = nv / dt
            out[role + "_wakeups_per_s"] = (v + nv) / dt
        for k, col in (("VmRSS", "vmrss_kb"), ("RssAnon", "rssanon_kb"),
                       ("RssShmem", "rssshmem_kb")):
            out[role + "_" + col] = num(p1.get(role + "_" + k))
        for k in ("wchar_pages", "syscw", "cpu_s_per_s", "wakeups_per_s"):
            if out.get(role + "_" + k) is None:
                problems.append("no %s of the %s process" % (k, role))
    return out, (t0, t1), problems


def cleaner_figures(jit, pf):
    """The cleaner's figures from proc_figures(): writes of bgw_jit's
    worker, its writers and core's writer together (whichever cleans, all
    count); CPU and wake-ups of the processes that clean (bgw_jit's worker
    and its writers when loaded, else core's writer), memory of the main
    one.  A process that was not running counts as zero writes
    (proc_figures), one that could not be read as missing."""
    who = "jit" if jit else "bgwriter"
    out = {"cleaner_" + k: pf.get(who + "_" + k) for k in (
        "runq_wait_ms_per_s", "vmrss_kb", "rssanon_kb", "rssshmem_kb")}
    for k in ("cpu_s", "cpu_s_per_s", "wakeups_per_s", "vcsw_per_s",
              "nvcsw_per_s"):
        v = pf.get(who + "_" + k)
        if jit and v is not None:
            v += sum(pf.get(r + "_" + k) or 0 for r in WRITER_ROLES)
        out["cleaner_" + k] = v
    for k in ("wchar_pages", "syscw"):
        v = [pf.get(r + "_" + k) for r in CLEANING_ROLES]
        out["cleaner_" + k] = None if None in v else sum(v)
    if out["cleaner_cpu_s_per_s"] is not None:
        out["cleaner_cpu_pct"] = 100.0 * out["cleaner_cpu_s_per_s"]
    return out


def accuracy(history):
    """Allocation-estimate accuracy over a complete bgw_jit_history.

    Per-cycle truth is not observable without patching core, so compare
    with the exact but lagged shared counter: the history is split at the
    cycles where a report of pg_stat_bgwriter.buffers_alloc arrived
    (alloc_reported > 0); window j runs from report cycle k_j up to the
    next, k_{j+1}.  Its credited allocations are compared with the report
    arriving at k_{j+1} (acc_*: a report counts allocations made before it
    arrives) and, to show what the alignment does, with the report at k_j
    (acc0_*).  Both over the same windows: all but the last.
    """
    r = [int(h["recent_alloc"]) for h in history]
    a = [int(h["alloc_reported"]) for h in history]
    res = {"acc_cycles": len(r), "acc_credited": sum(r),
           "acc_reported": sum(a), "acc_rel_err_pct": None}
    if sum(a) > 0:
        res["acc_rel_err_pct"] = 100.0 * (sum(r) - sum(a)) / sum(a)
    k = [i for i, x in enumerate(a) if x > 0]
    if len(k) < 2:
        return res
    credit = [sum(r[k[j]:k[j + 1]]) for j in range(len(k) - 1)]
    cycles = sum(k[j + 1] - k[j] for j in range(len(k) - 1))
    cpw = cycles / len(credit)
    res.update(acc_windows=len(credit), acc_cycles_per_window=cpw)
    for prefix, lag in (("acc", 1), ("acc0", 0)):
        truth = [a[k[j + lag]] for j in range(len(credit))]
        mae = sum(abs(c - t) for c, t in zip(credit, truth)) / len(credit)
        per_cycle_alloc = sum(truth) / cycles
        res[prefix + "_mae_window"] = mae
        res[prefix + "_mae_cycle"] = mae / cpw
        if per_cycle_alloc > 0:
            res[prefix + "_mae_cycle_pct"] = \
                100.0 * (mae / cpw) / per_cycle_alloc
    return res


def read_history(rawdir):
    return read_rows(os.path.join(rawdir, "history.csv"))


def end_counters(jit, reload_, final, meta):
    """The counters at the end of a run.

    reload.csv holds the write counters, read in the statement that sends
    the settling reload; final.csv holds buffers_backend, read after the
    checkpointer absorbed the backends' counts, so covering the writes up
    to the reload, and the allocation counts, which stopped with the load
    and by then have been reported (the built-in writer's, ~200 ms late)
    and credited (bgw_jit's, one cycle later).  For bgw_jit, backend writes
    are that buffers_backend minus the worker's own writes (LRU and
    all-buffers scans) up to the reload: bgw_jit_stats.buf_backend's
    formula, evaluated at one moment.  The view's own buf_backend, read
    after the wait, is kept as jit_buf_backend_view.  From 16 that view
    figure is exact (the worker takes its own writes out of pg_stat_io's
    count itself, with no absorb to pair them with), so it is used.
    """
    r = {k: num(v) for k, v in reload_.items()}
    f = {k: num(v) for k, v in final.items()}
    out = {"stat_buffers_clean": r.get("buffers_clean"),
           "stat_buffers_backend": f.get("buffers_backend"),
           "stat_buffers_alloc": f.get("buffers_alloc"),
           "stat_maxwritten_clean": r.get("maxwritten_clean"),
           "buffers_checkpoint": r.get("buffers_checkpoint")}
    if f.get("accounts_bytes") is not None:
        out["accounts_mb"] = f["accounts_bytes"] / 2 ** 20
    if jit:
        for k in ("buf_clean", "buf_all_clean", "buf_clean_evicted",
                  "buf_clean_redirtied", "maxwritten_clean", "cycles", "laps"):
            out["jit_" + k] = r.get("jit_" + k)
        out["jit_buf_alloc"] = f.get("jit_buf_alloc")
        out["jit_buf_backend_view"] = f.get("jit_buf_backend_view")
        own = (r.get("jit_buf_clean"), r.get("jit_buf_all_clean"))
        if (num(meta.get("server_version_num")) or 0) >= 160000:
            out["jit_buf_backend"] = out["jit_buf_backend_view"]
        elif f.get("buffers_backend") is not None and None not in own:
            out["jit_buf_backend"] = max(0, f["buffers_backend"] - sum(own))
        e, d = r.get("jit_buf_clean_evicted"), r.get("jit_buf_clean_redirtied")
        if e is not None and d is not None and e + d > 0:
            out["evicted_pct"] = 100.0 * e / (e + d)
    return out


def cleaner_settings(meta, settings):
    """Which cleaner ran and with what settings, as the server reported.

    Values are kept as the server spells them (a setting may be 'auto'),
    and jit_settings lists every bgw_jit.* setting the server knows, so a
    new one shows up without a change here."""
    jit_settings = " ".join("%s=%s" % (k[len("bgw_jit."):], v)
                            for k, v in sorted(settings.items())
                            if k.startswith("bgw_jit."))
    if meta.get("jit_loaded") == "1":
        return {"cleaner": "bgw_jit",
                "nbuffers": settings.get("shared_buffers"),
                "strategy": settings.get("bgw_jit.strategy") or "jit",
                "multiplier": settings.get("bgw_jit.lru_multiplier"),
                "delay_ms": settings.get("bgw_jit.delay"),
                "maxpages": settings.get("bgw_jit.lru_maxpages"),
                "smoothing": settings.get("bgw_jit.smoothing_samples"),
                "history_size": settings.get("bgw_jit.history_size"),
                "jit_settings": jit_settings}
    maxpages = num(settings.get("bgwriter_lru_maxpages"))
    cleaner = "builtin" if maxpages and maxpages > 0 else "none"
    return {"cleaner": cleaner, "strategy": cleaner,
            "nbuffers": settings.get("shared_buffers"),
            "multiplier": settings.get("bgwriter_lru_multiplier"),
            "delay_ms": settings.get("bgwriter_delay"),
            "maxpages": settings.get("bgwriter_lru_maxpages"),
            "smoothing": "16", "history_size": None, "jit_settings": None}


# ---------------------------------------------------------------------------
# run-figures

RESULT_COLS = [
    "run_id", "config", "info", "round", "workload", "clients", "scale",
    "shared_buffers", "duration_s",
    "checkpoints", "cleaner", "strategy", "multiplier", "delay_ms", "maxpages",
    "smoothing", "history_size", "jit_settings",
    "tps", "xacts", "failed_xacts", "lat_mean_ms", "lat_p50_ms", "lat_p99_ms",
    # counts bgw_jit does not produce (see HOW_MEASURED) and issue 10's
    # ratios against nobgw in the same round
    "backend_pgss", "backend_extend", "backend_evict", "pgss_dealloc",
    "unused_buffers_at_start", "alloc_laps", "warmup_s", "warmup_alloc",
    "cleaner_wchar_pages", "cleaner_syscw", "cleaner_own_writes",
    "cleaner_wchar_quiet_pages", "cleaner_own_quiet", "cleaner_wchar_minus_own", "checkpointer_wchar_pages",
    "checkpointer_syscw", "total_writes_indep", "writes_per_xact_indep",
    "cleaner_pct_indep", "cleaner_pct_indep_evict",
    "tps_vs_nobgw", "p99_vs_nobgw", "wpx_vs_nobgw",
    # --io-waits: what the backends waited for (waits.csv, pg_stat_io)
    "backend_dfw_share", "waits_samples_per_s", "backend_write_s",
    "dfw_vs_nobgw", "write_s_vs_nobgw",
    "cleaner_cpu_pct", "cleaner_wakeups_per_s", "cleaner_vcsw_per_s",
    "cleaner_nvcsw_per_s", "cleaner_runq_wait_ms_per_s",
    "cleaner_cpu_us_per_page", "cleaner_vmrss_kb",
    "cleaner_rssanon_kb", "cleaner_rssshmem_kb",
    "jit_wchar_pages", "jit_syscw", "jit_wakeups_per_s", "jit_cycles_per_s",
    "bgwriter_wchar_pages", "bgwriter_syscw", "bgwriter_wakeups_per_s",
    # the cleaners' own counters (bgw_jit_stats, else pg_stat_bgwriter)
    "buf_clean", "buf_backend", "buf_alloc", "maxwritten_clean",
    "buffers_checkpoint", "buf_all_clean", "cleaner_pct", "total_writes",
    "writes_per_xact", "total_vs_nobgw_same_round",
    "stat_buffers_clean", "stat_buffers_backend", "stat_buffers_alloc",
    "stat_maxwritten_clean",
    "jit_buf_clean", "jit_buf_backend", "jit_buf_alloc",
    "jit_buf_clean_evicted", "jit_buf_clean_redirtied", "evicted_pct",
    "jit_alloc_vs_stat_pct", "jit_buf_backend_view", "jit_cycles",
    "jit_laps", "jit_cycle_cpu_s_per_s",
    "cleaner_cpu_s_per_s", "bgwriter_cpu_s_per_s", "jit_cpu_s_per_s",
    "accounts_mb",
    "acc_complete", "acc_cycles", "acc_credited", "acc_reported",
    "acc_rel_err_pct", "acc_windows", "acc_cycles_per_window",
    "acc_mae_window", "acc_mae_cycle", "acc_mae_cycle_pct",
    "acc0_mae_window", "acc0_mae_cycle", "acc0_mae_cycle_pct",
    "ok", "problems"]

# A run without these is a failed run, except the two shares when there
# was nothing to share: no cleaner and no backend wrote a page (a large
# pool lapped less than once a run can evict only clean buffers; the
# run's tps and latency still count).
REQUIRED = ["tps", "lat_mean_ms", "lat_p99_ms", "buf_clean", "buf_backend",
            "buf_alloc", "maxwritten_clean", "buffers_checkpoint",
            "cleaner_pct", "total_writes", "backend_pgss", "backend_extend",
            "cleaner_wchar_pages", "checkpointer_wchar_pages",
            "total_writes_indep", "writes_per_xact_indep",
            "cleaner_pct_indep"]
# ... and these when the cleaning process was running (it always is:
# core's writer runs even when it does not clean)
REQUIRED_IF_CLEANER = ["cleaner_cpu_s_per_s", "cleaner_wakeups_per_s",
                       "cleaner_vmrss_kb", "cleaner_rssanon_kb"]


def io_wchar(text):
    """wchar of a /proc/PID/io text, or None."""
    m = re.search(r"^wchar:\s*(\d+)", text or "", re.M)
    return int(m.group(1)) if m else None


def own_writes(a, b):
    """The cleaners' own write counts' rise between two reads of
    own_io_sql (bench/run): bgw_jit_stats' plus pg_stat_bgwriter's."""
    if num(a.get("stat_buffers_clean")) is None or \
            num(b.get("stat_buffers_clean")) is None:
        return None
    return sum(num(b.get(k)) - num(a.get(k))
               for k in ("stat_buffers_clean", "jit_own")
               if num(a.get(k)) is not None and num(b.get(k)) is not None)


def pgss_figures(rawdir):
    """Backends' writes over a run from pg_stat_statements (pgss0/1.csv):
    backend_pgss, the rise of sum(shared_blks_written); backend_extend,
    the blocks the user relations grew by (each one a backend's
    extension, which PostgreSQL 15 counts as a written block);
    backend_evict, the rest: dirty buffers backends wrote out.  Also the
    cleaners' own write counts read in the same statements
    (cleaner_own_writes: bgw_jit_stats' plus pg_stat_bgwriter's)."""
    a = read_psql_csv(os.path.join(rawdir, "pgss0.csv"))
    b = read_psql_csv(os.path.join(rawdir, "pgss1.csv"))
    out, problems = {}, []
    w0, w1 = num(a.get("pgss_written")), num(b.get("pgss_written"))
    r0, r1 = num(a.get("rel_blocks")), num(b.get("rel_blocks"))
    if None not in (w0, w1):
        out["backend_pgss"] = w1 - w0
    if None not in (r0, r1):
        out["backend_extend"] = r1 - r0
    if None not in (out.get("backend_pgss"), out.get("backend_extend")):
        out["backend_evict"] = out["backend_pgss"] - out["backend_extend"]
        if out["backend_evict"] < 0:
            problems.append("relations grew by more blocks than "
                            "pg_stat_statements counted written")
    own = own_writes(a, b)
    if own is not None:
        out["cleaner_own_writes"] = own
    # The same own count against the cleaners' wchar read by the server
    # right after it, from the start to 1.5 s after the load (own_end.csv),
    # when the cleaner has gone quiet and published all its writes.
    e = read_psql_csv(os.path.join(rawdir, "own_end.csv"))
    own = own_writes(a, e)
    ws = [(io_wchar(a.get(r + "_io")), io_wchar(e.get(r + "_io")))
          for r in CLEANING_ROLES if r + "_io" in a]
    if own is not None and ws and all(None not in w for w in ws):
        out["cleaner_own_quiet"] = own
        out["cleaner_wchar_quiet_pages"] = sum(w1 - w0 for w0, w1 in ws) / PAGE
        out["cleaner_wchar_minus_own"] = out["cleaner_wchar_quiet_pages"] - own
    wt0, wt1 = num(a.get("backend_write_ms")), num(b.get("backend_write_ms"))
    if None not in (wt0, wt1):
        out["backend_write_s"] = (wt1 - wt0) / 1000.0
    out["unused_buffers_at_start"] = num(a.get("unused_buffers"))
    out["pgss_dealloc"] = num(b.get("pgss_dealloc"))
    if out["pgss_dealloc"]:
        problems.append("pg_stat_statements evicted %d entries: their "
                        "writes are lost" % out["pgss_dealloc"])
    return out, problems


def waits_figures(rawdir):
    """--io-waits: from waits.csv (t, backends in DataFileWrite, active
    client backends, 50 times a second), the share of the active
    backends' samples spent in IO:DataFileWrite and the samples taken per
    second.  Empty without the file."""
    path = os.path.join(rawdir, "waits.csv")
    if not os.path.exists(path):
        return {}
    ts, dfw, active = [], 0, 0
    for line in open(path):
        f = line.strip().split(",")
        if len(f) != 3:
            continue
        ts.append(float(f[0]))
        dfw += int(f[1])
        active += int(f[2])
    out = {}
    if len(ts) > 1 and ts[-1] > ts[0]:
        out["waits_samples_per_s"] = (len(ts) - 1) / (ts[-1] - ts[0])
    if active:
        out["backend_dfw_share"] = float(dfw) / active
    return out


def run_start(rawdir, keys):
    """A raw directory's meta.env, the cleaner and its settings as the
    server reported them, whether bgw_jit cleaned, and a row holding
    meta's values of keys."""
    meta = read_env(os.path.join(rawdir, "meta.env"))
    cs = cleaner_settings(meta, read_env(os.path.join(rawdir,
                                                      "settings.env")))
    return meta, cs, cs["cleaner"] == "bgw_jit", \
        {k: meta.get(k) for k in keys}


def cmd_run_figures(args):
    rawdir, outdir = args
    meta, cs, jit, row = run_start(rawdir, (
        "run_id", "config", "info", "round", "workload", "clients", "scale",
        "shared_buffers", "checkpoints"))
    final = read_psql_csv(os.path.join(rawdir, "final.csv"))
    reload_ = read_psql_csv(os.path.join(rawdir, "reload.csv"))
    pb = parse_pgbench(rawdir)
    row["duration_s"] = meta.get("duration")
    row.update(cs)
    problems = []

    row.update({k: pb[k] for k in ("tps", "xacts", "failed_xacts",
                                   "lat_mean_ms", "lat_p50_ms",
                                   "lat_p99_ms")})
    if meta.get("pgbench_rc") != "0":
        problems.append("pgbench exit %s: %s" % (
            meta.get("pgbench_rc"), " | ".join(pb["errors"][-3:])))
    if pb["failed_xacts"] or pb["log_failed"]:
        problems.append("%s failed transactions"
                        % (pb["failed_xacts"] or pb["log_failed"]))
    if pb["xacts"] and pb["log_xacts"] < 0.99 * pb["xacts"]:
        problems.append("per-transaction log has %d of %d transactions"
                        % (pb["log_xacts"], pb["xacts"]))

    row.update(end_counters(jit, reload_, final, meta))
    if jit:
        row["buf_clean"] = row["jit_buf_clean"]
        row["buf_backend"] = row.get("jit_buf_backend")
        row["buf_alloc"] = row["jit_buf_alloc"]
        row["maxwritten_clean"] = row["jit_maxwritten_clean"]
        row["buf_all_clean"] = row["jit_buf_all_clean"]
        if row["jit_buf_alloc"] is not None and row["stat_buffers_alloc"]:
            row["jit_alloc_vs_stat_pct"] = 100.0 * (
                row["jit_buf_alloc"] - row["stat_buffers_alloc"]
            ) / row["stat_buffers_alloc"]
    else:
        row["buf_clean"] = row["stat_buffers_clean"]
        row["buf_backend"] = row["stat_buffers_backend"]
        row["buf_alloc"] = row["stat_buffers_alloc"]
        row["maxwritten_clean"] = row["stat_maxwritten_clean"]
        row["buf_all_clean"] = 0
    c, b = row["buf_clean"], row["buf_backend"]
    if c is not None and b is not None:
        if c + b > 0:
            row["cleaner_pct"] = 100.0 * c / (c + b)
        if None not in (row["buffers_checkpoint"], row["buf_all_clean"]):
            row["total_writes"] = (c + b + row["buffers_checkpoint"] +
                                   row["buf_all_clean"])
            if pb["xacts"]:
                row["writes_per_xact"] = row["total_writes"] / pb["xacts"]

    pf, (t0, t1), perr = proc_figures(rawdir, meta)
    problems += perr
    row.update(pf)
    row.update(cleaner_figures(jit, pf))
    gf, gerr = pgss_figures(rawdir)
    problems += gerr
    row.update(gf)
    row.update(waits_figures(rawdir))
    if meta.get("io_waits") == "1" and row.get("waits_samples_per_s", 0) < 40:
        problems.append("the wait sampler took %.0f samples/s, not 50"
                        % row.get("waits_samples_per_s", 0))
    independent_writes(row, pb["xacts"])
    # how many times the clock hand went round the pool during the run
    nbuf = num(cs.get("nbuffers"))
    if nbuf and row.get("stat_buffers_alloc") is not None:
        row["alloc_laps"] = row["stat_buffers_alloc"] / nbuf
    row["warmup_s"], row["warmup_alloc"] = (meta.get("warmup_s"),
                                            meta.get("warmup_alloc"))
    if jit and row.get("jit_cycles") is not None and t1:
        row["jit_cycles_per_s"] = row["jit_cycles"] / (t1 - t0)

    history = read_history(rawdir) if jit else []
    if history:
        cyc = [int(h["cycle"]) for h in history]
        complete = cyc[0] == 1 and cyc[-1] == len(cyc)
        row["acc_complete"] = 1 if complete else 0
        if complete:
            row.update(accuracy(history))
        # the worker's own per-cycle CPU clock over pgbench's span, as a
        # cross-check of the /proc figure
        if complete and t1:
            row["jit_cycle_cpu_s_per_s"] = sum(
                int(h["cpu_us"]) for h in history
                if t0 <= num(h["at"]) <= t1) / 1e6 / (t1 - t0)
    elif jit and "enabled=off" not in (cs["jit_settings"] or "").split():
        # (with bgw_jit.enabled = off the worker records no cycles)
        problems.append("no bgw_jit_history")

    cleaner_ran = (("jit" if jit else "bgwriter") + "_pid") in read_env(
        os.path.join(rawdir, "proc0.env"))
    undefined = set()
    if row.get("buf_clean") == 0 and row.get("buf_backend") == 0:
        undefined.add("cleaner_pct")
    if row.get("cleaner_wchar_pages") == 0 and row.get("backend_pgss") == 0:
        undefined.add("cleaner_pct_indep")
    for k in REQUIRED + (REQUIRED_IF_CLEANER if cleaner_ran else []):
        if row.get(k) is None and k not in undefined:
            problems.append("missing " + k)
    row["ok"] = 0 if problems else 1
    row["problems"] = "; ".join(problems)

    write_series(rawdir, outdir, row["run_id"], pb["t0"], jit)
    append_row(os.path.join(outdir, "results.csv"), RESULT_COLS, row)
    print("  %-16s c=%-2s r=%s  tps %s  p99 %s ms  cleaner wchar/8k %s "
          "(own %s) backends %s  cleaner %s%% (own %s%%)  cpu %s%%  "
          "wake-ups %s/s%s" % (
              row["config"], row["clients"], row["round"], fmt(row["tps"]),
              fmt(row["lat_p99_ms"], 2), fmt(row.get("cleaner_wchar_pages")),
              fmt(row.get("cleaner_own_writes")),
              fmt(row.get("backend_pgss")),
              fmt(row.get("cleaner_pct_indep"), 2),
              fmt(row.get("cleaner_pct"), 2),
              fmt(row.get("cleaner_cpu_pct"), 1),
              fmt(row.get("cleaner_wakeups_per_s")),
              "" if row["ok"] else "  FAILED: " + row["problems"]))


def independent_writes(row, xacts):
    """Issue 10's counts: total writes and cleaner_pct from the kernel's
    and pg_stat_statements' counts, and the cleaner's own count beside."""
    cl, be = row.get("cleaner_wchar_pages"), row.get("backend_pgss")
    ck = row.get("checkpointer_wchar_pages")
    if None in (cl, be, ck):
        return
    row["total_writes_indep"] = cl + be + ck
    if xacts:
        row["writes_per_xact_indep"] = row["total_writes_indep"] / xacts
    if cl + be > 0:
        row["cleaner_pct_indep"] = 100.0 * cl / (cl + be)
    ev = row.get("backend_evict")
    if ev is not None and cl + ev > 0:
        row["cleaner_pct_indep_evict"] = 100.0 * cl / (cl + max(ev, 0))
    cpu = row.get("cleaner_cpu_s")
    if cpu is not None and cl > 0:
        row["cleaner_cpu_us_per_page"] = cpu * 1e6 / cl


def write_series(rawdir, outdir, run_id, t0, jit):
    sdir = os.path.join(outdir, "series")
    os.makedirs(sdir, exist_ok=True)
    prog = parse_progress(rawdir)
    write_csv(os.path.join(sdir, run_id + "_progress.csv"),
              ["t_s", "tps", "lat_ms", "lat_stddev_ms"], prog)
    samples = parse_sampler(rawdir)
    if not samples:
        return
    base = t0 if t0 is not None else samples[0]["t"]
    ts = [s["t"] - base for s in samples]
    if jit:
        backend = [s["jit_buf_backend"] for s in samples]
        clean = [s["jit_buf_clean"] for s in samples]
        alloc = [s["jit_buf_alloc"] for s in samples]
    else:
        backend = [s["buffers_backend"] for s in samples]
        clean = [s["buffers_clean"] for s in samples]
        alloc = [s["buffers_alloc"] for s in samples]
    # buffers_backend arrives in lumps (the checkpointer absorbs the
    # backends' counts when its queue is half full): smooth over 5 s.
    b5 = trailing_rate(ts, backend, 5.0)
    c1 = trailing_rate(ts, clean, 1.0)
    a1 = trailing_rate(ts, alloc, 1.0)
    rows = [[ts[i]] + [samples[i][k] for k in SAMPLER_COLS[1:]]
            + [backend[i], clean[i], b5[i], c1[i], a1[i]]
            for i in range(len(samples))]
    write_csv(os.path.join(sdir, run_id + "_counters.csv"),
              ["t_s"] + SAMPLER_COLS[1:] +
              ["backend_cum", "clean_cum", "backend_per_s_5s",
               "clean_per_s", "alloc_per_s"], rows)


# ---------------------------------------------------------------------------
# step-figures

STEP_COLS = ["run_id", "config", "info", "round", "cleaner", "multiplier",
             "delay_ms", "idle_s", "tps",
             "at_1_s", "backend_1_lo", "backend_1", "at_2_s", "backend_2_lo",
             "backend_2", "at_5_s", "backend_5_lo", "backend_5", "absorb_ms",
             "backend_total", "clean_total", "first_clean_s",
             "react90_s", "steady_clean_per_s", "jit_first_active_s",
             "ok", "problems"]


def cmd_step_figures(args):
    rawdir, outdir = args
    meta, cs, jit, row = run_start(rawdir, ("run_id", "config", "info",
                                            "round", "idle_s"))
    pb = parse_pgbench(rawdir)
    row.update(cleaner=cs["cleaner"], multiplier=cs["multiplier"],
               delay_ms=cs["delay_ms"], tps=pb["tps"])
    problems = []
    if meta.get("pgbench_rc") != "0":
        problems.append("pgbench exit %s" % meta.get("pgbench_rc"))
    t0 = pb["t0"]
    if t0 is None:
        problems.append("no per-transaction log")

    # marks.csv: mark,W,t_absorb,own_before,own_after,backend,absorb_ms
    # (bench_mark() in bench/run); own_* are empty without bgw_jit
    path = os.path.join(rawdir, "marks.csv")
    marks = {}
    if os.path.exists(path):
        for line in open(path):
            p = line.strip().split(",")
            if len(p) == 7 and p[0] == "mark":
                marks[p[1]] = [num(x) for x in p[2:]]
    absorb = []
    for w in ("1", "2", "5"):
        if w in marks and t0 is not None:
            t, before, after, backend, ms = marks[w]
            row["at_%s_s" % w] = t - t0
            if backend is not None:
                row["backend_" + w] = backend - (before or 0)
                row["backend_%s_lo" % w] = backend - (after or 0)
            absorb.append(ms)
        if row.get("backend_" + w) is None:
            problems.append("no backend count at ~%s s" % w)
    if absorb:
        row["absorb_ms"] = sum(absorb) / len(absorb)

    end = end_counters(
        jit, read_psql_csv(os.path.join(rawdir, "reload.csv")),
        read_psql_csv(os.path.join(rawdir, "final.csv")), meta)
    row["backend_total"] = end.get("jit_buf_backend" if jit
                                   else "stat_buffers_backend")
    row["clean_total"] = end.get("jit_buf_clean" if jit
                                 else "stat_buffers_clean")

    samples = parse_sampler(rawdir)
    key = "jit_buf_clean" if jit else "buffers_clean"
    series = []
    if samples and t0 is not None:
        ts = [s["t"] - t0 for s in samples]
        clean = [s[key] for s in samples]
        rate = trailing_rate(ts, clean, 0.5)
        series = list(zip(ts, clean, rate))
        if cs["cleaner"] != "none":
            step_reaction(row, series)
            if row["steady_clean_per_s"] is None:
                problems.append("no steady cleaning rate")
    elif not samples:
        problems.append("no samples")
    sdir = os.path.join(outdir, "series")
    os.makedirs(sdir, exist_ok=True)
    write_csv(os.path.join(sdir, row["run_id"] + "_step.csv"),
              ["t_s", "clean_cum", "clean_per_s_0.5s"], series)

    if jit and t0 is not None:
        for h in read_history(rawdir):
            if num(h["at"]) >= t0 and int(h["recent_alloc"]) > 0:
                row["jit_first_active_s"] = num(h["at"]) - t0
                break
    row["ok"] = 0 if problems else 1
    row["problems"] = "; ".join(problems)
    append_row(os.path.join(outdir, "step.csv"), STEP_COLS, row)
    def rng(w):
        lo, hi = row.get("backend_%s_lo" % w), row.get("backend_" + w)
        return fmt(hi) if lo is None or hi is None or round(lo) == round(hi) \
            else "%s-%s" % (fmt(lo), fmt(hi))
    print("  step %-16s r=%s  backend writes by ~1/2/5 s: %s / %s / %s  "
          "first clean %s s  90%% of steady at %s s%s" % (
              row["config"], row["round"], rng("1"), rng("2"), rng("5"),
              fmt(row.get("first_clean_s"), 2), fmt(row.get("react90_s"), 2),
              "" if row["ok"] else "  FAILED: " + row["problems"]))


def step_reaction(row, series):
    """First write, steady cleaned/s (5-9.5 s), time to 90% of it."""
    base = [c for t, c, _ in series if t <= 0 and c is not None]
    c0 = base[-1] if base else 0
    for t, c, _ in series:
        if t > 0 and c is not None and c > c0:
            row["first_clean_s"] = t
            break
    win = [(t, c) for t, c, _ in series if 5.0 <= t <= 9.5 and c is not None]
    if len(win) >= 2 and win[-1][0] > win[0][0]:
        steady = (win[-1][1] - win[0][1]) / (win[-1][0] - win[0][0])
        row["steady_clean_per_s"] = steady
        if steady > 0:
            for t, _, r in series:
                if t > 0 and r is not None and r >= 0.9 * steady:
                    row["react90_s"] = t
                    break
    else:
        row["steady_clean_per_s"] = None


# ---------------------------------------------------------------------------
# idle-figures

IDLE_COLS = ["run_id", "config", "info", "round", "cleaner", "jit_settings",
             "idle_s", "idle_warmup_s", "window_s", "cleaner_wakeups_per_s",
             "cleaner_vcsw_per_s", "cleaner_nvcsw_per_s", "cleaner_cpu_pct",
             "cleaner_wchar_pages", "jit_cycles_per_s", "jit_hibernations",
             "jit_buf_clean", "bgwriter_wakeups_per_s",
             "bgwriter_cpu_s_per_s", "cleaner_vmrss_kb", "cleaner_rssanon_kb",
             "ok", "problems"]


def cmd_idle_figures(args):
    rawdir, outdir = args
    meta, cs, jit, row = run_start(rawdir, ("run_id", "config", "info",
                                            "round", "idle_s",
                                            "idle_warmup_s"))
    row.update(cleaner=cs["cleaner"], jit_settings=cs["jit_settings"])
    pf, (t0, t1), problems = proc_figures(rawdir, meta)
    row.update(pf)
    row.update(cleaner_figures(jit, pf))
    if t1:
        row["window_s"] = t1 - t0
    if meta.get("pgbench_rc") != "0":
        problems.append("warm-up pgbench exit %s" % meta.get("pgbench_rc"))
    if jit:
        # cycles,buf_clean,hibernations of bgw_jit_stats around the window
        a = [num(x) for x in meta.get("jit_stats0", "").split(",")]
        b = [num(x) for x in meta.get("jit_stats1", "").split(",")]
        if len(a) == len(b) == 3 and None not in a + b and t1:
            row["jit_cycles_per_s"] = (b[0] - a[0]) / (t1 - t0)
            row["jit_buf_clean"] = b[1] - a[1]
            row["jit_hibernations"] = b[2] - a[2]
        else:
            problems.append("no bgw_jit_stats around the window")
    for k in ("window_s", "cleaner_wakeups_per_s", "cleaner_cpu_pct"):
        if row.get(k) is None:
            problems.append("missing " + k)
    row["ok"] = 0 if problems else 1
    row["problems"] = "; ".join(problems)
    append_row(os.path.join(outdir, "idle.csv"), IDLE_COLS, row)
    print("  idle %-16s r=%s  %s s: wake-ups %s/s  CPU %s%%  cycles %s/s  "
          "writes %s%s" % (
              row["config"], row["round"], fmt(row.get("window_s"), 1),
              fmt(row.get("cleaner_wakeups_per_s"), 2),
              fmt(row.get("cleaner_cpu_pct"), 3),
              fmt(row.get("jit_cycles_per_s"), 2),
              fmt(row.get("cleaner_wchar_pages")),
              "" if row["ok"] else "  FAILED: " + row["problems"]))


# ---------------------------------------------------------------------------
# report


def group_runs(rows):
    """{(config, clients): [rows]} and the run order of configs/clients."""
    groups, configs, clients = {}, [], []
    for r in rows:
        k = (r["config"], int(r["clients"]))
        groups.setdefault(k, []).append(r)
        if r["config"] not in configs:
            configs.append(r["config"])
        if int(r["clients"]) not in clients:
            clients.append(int(r["clients"]))
    return groups, configs, sorted(clients)


def med(rs, col):
    return median([num(r.get(col)) for r in rs])


def span(rs, col):
    xs = [num(r.get(col)) for r in rs if num(r.get(col)) is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def med_span(rs, col, d=0):
    """'median [min–max]' over rounds (just the median for one value)."""
    lo, hi = span(rs, col)
    m = med(rs, col)
    if m is not None and lo != hi:
        return "%s [%s–%s]" % (fmt(m, d), fmt(lo, d), fmt(hi, d))
    return fmt(m, d)


def ratio(a, b):
    return fmt(a / b, 2) if a is not None and b else "–"


def psql_table(header, rows):
    """An aligned table in psql's style, like the seeds'."""
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows
         else len(str(h)) for i, h in enumerate(header)]
    line = lambda cells: " | ".join(str(c).ljust(w[i])
                                    for i, c in enumerate(cells)).rstrip()
    out = [line(header), "-+-".join("-" * x for x in w)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def gnuplot_terminal():
    try:
        p = subprocess.run(["gnuplot", "-e", "set terminal"],
                           capture_output=True, text=True, timeout=30)
        if "pngcairo" in p.stdout + p.stderr:
            return "pngcairo size 1000,600 font ',10'"
    except (OSError, subprocess.SubprocessError):
        pass
    return "png size 1000,600"


def run_gnuplot(outdir, name, script, problems):
    gp = os.path.join(outdir, "plots", name + ".gp")
    with open(gp, "w") as f:
        f.write(script)
    p = subprocess.run(["gnuplot", os.path.abspath(gp)], cwd=outdir,
                       capture_output=True, text=True)
    png = os.path.join(outdir, name + ".png")
    if p.returncode != 0 or not os.path.exists(png) \
            or os.path.getsize(png) == 0:
        problems.append("gnuplot %s failed: %s" % (name, p.stderr.strip()))
        return False
    return True


def gp_quote(s):
    return '"' + str(s).replace('"', "'") + '"'


def series_plot(outdir, term, name, title, ylabel, blocks, problems,
                xrange="*:*"):
    """blocks: [(label, datafile, xcol, ycol)]; lines, one per block."""
    blocks = [b for b in blocks if os.path.exists(b[1])
              and sum(1 for _ in open(b[1])) > 2]
    if not blocks:
        problems.append("no data for plot " + name)
        return None
    plots = ", ".join(
        "%s skip 1 using %d:%d with lines lw 1.5 title %s"
        % (gp_quote(os.path.relpath(d, outdir)), x, y, gp_quote(label))
        for label, d, x, y in blocks)
    script = ("set terminal %s noenhanced\nset output %s\n"
              "set datafile separator ','\n"
              "set key outside right\nset grid\nset title %s\n"
              "set xlabel 'seconds since the first transaction'\n"
              "set ylabel %s\nset xrange [%s]\nset yrange [0:*]\nplot %s\n"
              % (term, gp_quote(name + ".png"), gp_quote(title),
                 gp_quote(ylabel), xrange, plots))
    return name + ".png" if run_gnuplot(outdir, name, script, problems) \
        else None


def cmd_report(args):
    outdir = args[0]
    meta = read_env(os.path.join(outdir, "meta.env"))
    rows = read_rows(os.path.join(outdir, "results.csv"))
    steps = read_rows(os.path.join(outdir, "step.csv"))
    idles = read_rows(os.path.join(outdir, "idle.csv"))
    problems = []
    ffile = os.path.join(outdir, "failures.txt")
    if os.path.exists(ffile):
        problems += [l.strip() for l in open(ffile) if l.strip()]
    problems += ["%s: %s" % (r["run_id"], r["problems"])
                 for r in rows + steps + idles if r.get("ok") != "1"]
    if meta.get("main") == "1" and not rows:
        problems.append("no measured runs in results.csv")
    if meta.get("step") == "1" and not steps:
        problems.append("no load-step runs in step.csv")
    if meta.get("idle", "0") != "0" and not idles:
        problems.append("no idle runs in idle.csv")

    groups, configs, clients = group_runs(rows)
    info = {r["config"]: r["info"] for r in rows}
    nobgw = {c: med(groups.get(("nobgw", c), []), "total_writes")
             for c in clients}
    nobgw_px = {c: med(groups.get(("nobgw", c), []), "writes_per_xact")
                for c in clients}
    # per-run ratios against nobgw of the same round and client count
    # (rewritten into results.csv; a failed nobgw run gives none)
    by_round = {(r["config"], r["clients"], r["round"]): r for r in rows}
    for r in rows:
        n = by_round.get(("nobgw", r["clients"], r["round"]))
        for col, src in NOBGW_RATIOS:
            a = num(r.get(src))
            b = num(n.get(src)) if n and n.get("ok") == "1" else None
            r[col] = "%.4f" % (a / b) if a is not None and b else ""
    if rows:
        with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=RESULT_COLS)
            w.writeheader()
            w.writerows(rows)

    os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
    term = gnuplot_terminal()
    L = []
    L.append("# bgw_jit benchmark, %s" % meta.get("started", "?"))
    L.append("")
    L.append("Command: `%s`  " % meta.get("cmdline", "?"))
    L.append("Machine: %s cores (`nproc`), %s, %s  "
             % (meta.get("nproc"), meta.get("cpu_model"),
                meta.get("pg_version")))
    L.append("Kernel: %s; finished %s  " % (meta.get("kernel"),
                                            meta.get("finished", "?")))
    if meta.get("main") == "1":
        L.append("Runs: scale %s, %s s per run, %s round(s), clients %s, "
                 "checkpoints %s; configurations in run order: %s"
                 % (meta.get("scale"), meta.get("duration"),
                    meta.get("rounds"), meta.get("clients"),
                    "every 30 s (--checkpoints)"
                    if meta.get("checkpoints") == "1"
                    else "pushed out of the runs", ", ".join(configs)
                    + (", reversed in even rounds"
                       if meta.get("order") == "alternate"
                       and int(meta.get("rounds") or 1) > 1 else "")))
    if meta.get("step") == "1":
        L.append("Load step: scale %s, %s round(s), configurations %s"
                 % (meta.get("scale"), meta.get("rounds"),
                    ", ".join(meta.get("step_configs", "").split())))
    if meta.get("workload"):
        L.append("Workload: %s (%s); shared_buffers %s%s%s; warm-up %s s "
                 "before each run (`--warmup`)"
                 % (meta.get("workload"),
                    WORKLOADS.get(meta.get("workload"), "?"),
                    meta.get("shared_buffers"),
                    " in huge pages (`--huge-pages`)"
                    if meta.get("huge_pages") == "1" else "",
                    "; data files written with direct I/O (`--direct-io`: "
                    "debug_io_direct = data)"
                    if meta.get("direct_io") == "1" else "",
                    meta.get("warmup")))
    L.append("")
    if problems:
        L.append("**FAILURES (%d)**: " % len(problems) +
                 "; ".join(problems[:20]))
        L.append("")
    if rows or idles:
        L += configs_section(rows + idles)
    if rows:
        L += zero_section(configs, groups, clients)
        L += waits_section(configs, groups, clients)
        L += counts_section(configs, groups, clients)
        L.append(HOW_MEASURED)
        L.append("## Seed 001 layout, per configuration (medians over rounds)")
        L.append("")
        for cfg in configs:
            L.append("`%s`: %s" % (cfg, info[cfg]))
            L.append("")
            L.append("```")
            L.append("clients tps buf_clean buf_backend buf_alloc")
            for c in clients:
                rs = groups.get((cfg, c))
                if rs:
                    L.append(" ".join([str(c)] + [fmt(med(rs, k)) for k in (
                        "tps", "buf_clean", "buf_backend", "buf_alloc")]))
            L.append("```")
            L.append("")

        L.append("## Seed 000 layout (medians over rounds)")
        L.append("")
        n = 0
        for c in clients:
            t = []
            for cfg in configs:
                rs = groups.get((cfg, c))
                if rs:
                    n += 1
                    t.append((info[cfg], n, fmt(med(rs, "tps")),
                              fmt(med(rs, "cleaner_pct"), 2)))
            L.append("%d client%s:" % (c, "" if c == 1 else "s"))
            L.append("")
            L.append("```")
            L.append(psql_table(("info", "set", "tps", "cleaner_pct"), t))
            L.append("```")
            L.append("")

        L.append("## Side by side, per client count")
        L.append("")
        L.append("Median over rounds, [min–max] for tps. *writes vs nobgw*: "
                 "median total writes (clean + backend + checkpoint, + bgw_jit's "
                 "all-buffers scan under `jit+all`) over "
                 "nobgw's median at the same client count: the cost of "
                 "cleaning (seed 001's \"75% more buffers\" is 1.75); *per xact*: "
                 "the same with writes per transaction, which discounts a "
                 "difference in tps. *evicted %*: bgw_jit's judgement of its "
                 "own writes (`evicted / (evicted + redirtied)`: the page "
                 "later left its buffer rather than being found dirty again; "
                 "writes not yet judged are left out). "
                 "*cleaner CPU*: CPU seconds per second of run of the "
                 "cleaning processes (bgw_jit's worker and its writers, else "
                 "the built-in writer).")
        L.append("")
        all_scan = any(num(r.get("buf_all_clean")) for r in rows)
        for c in clients:
            t = []
            for cfg in configs:
                rs = groups.get((cfg, c))
                if not rs:
                    continue
                lo, hi = span(rs, "tps")
                extra = [fmt(med(rs, "buf_all_clean"))] if all_scan else []
                tw = med(rs, "total_writes")
                t.append([cfg, "%s [%s–%s]" % (fmt(med(rs, "tps")), fmt(lo),
                                               fmt(hi)),
                          fmt(med(rs, "lat_mean_ms"), 3),
                          fmt(med(rs, "lat_p99_ms"), 3),
                          fmt(med(rs, "cleaner_pct"), 2),
                          fmt(tw),
                          ratio(tw, nobgw.get(c)),
                          ratio(med(rs, "writes_per_xact"), nobgw_px.get(c)),
                          fmt(med(rs, "buffers_checkpoint"))] + extra + [
                          fmt(med(rs, "evicted_pct"), 1),
                          fmt(med(rs, "maxwritten_clean")),
                          fmt(med(rs, "cleaner_cpu_s_per_s"), 3),
                          str(len(rs))])
            L.append("### %d client%s" % (c, "" if c == 1 else "s"))
            L.append("")
            L.append(md_table(["config", "tps", "lat mean ms", "p99 ms",
                               "cleaner_pct", "total writes",
                               "writes vs nobgw", "per xact vs nobgw",
                               "ckpt writes"] +
                              (["all-scan writes"] if all_scan else []) +
                              ["evicted %", "maxwritten_clean",
                               "cleaner CPU s/s", "rounds"], t))
            L.append("")
        L += alloc_section(rows, configs, groups, clients)
        L += long_statements_section(outdir, rows)
        L += accuracy_section(rows, configs, groups, clients)
        sizes = [num(r.get("accounts_mb")) for r in rows]
        sizes = [s for s in sizes if s is not None]
        if sizes:
            L.append("pgbench_accounts grew from %.0f MB to %.0f MB over the "
                     "runs (update-only without vacuum); interleaving the "
                     "configurations in every round spreads that drift over "
                     "all of them." % (sizes[0], sizes[-1]))
            L.append("")

    if steps:
        L += step_section(steps)
    if idles:
        L += idle_section(idles)

    L.append("## Plots")
    L.append("")
    pngs = []
    if rows:
        round1 = sorted({r["round"] for r in rows})[0]
        ends = sorted({clients[-1], clients[0]}, reverse=True)
        ckpt = ("; checkpoints every 30 s" if meta.get("checkpoints") == "1"
                else "")
        # (file name, series, column, title, y label) of the per-second plots
        plots = [
            ("tps", "progress", 2, "tps per second (pgbench -P 1%s)" % ckpt,
             "tps"),
            ("latency", "progress", 3,
             "mean latency per second (pgbench -P 1%s)" % ckpt, "ms"),
            ("backend_writes", "counters", 10,
             "backend writes per second (5 s moving average: the count "
             "arrives in lumps)", "buffers written by backends / s"),
        ]
        for c in ends:
            for name, series, col, title, ylabel in plots:
                blocks = [(cfg, os.path.join(outdir, "series",
                                             "%s_c%d_r%s_%s.csv"
                                             % (cfg, c, round1, series)),
                           1, col)
                          for cfg in configs if (cfg, c) in groups]
                pngs.append(series_plot(
                    outdir, term, "%s_c%d" % (name, c),
                    "%s, %d client%s, round %s"
                    % (title, c, "" if c == 1 else "s", round1),
                    ylabel, blocks, problems))
        pngs.append(grid_plot(outdir, term, rows, configs, groups, clients,
                              problems))
    if steps:
        pngs.append(step_plot(outdir, term, steps, problems))
    for p in pngs:
        if p:
            L.append("![%s](%s)" % (p, p))
            L.append("")
    if not [p for p in pngs if p]:
        L.append("(none)")
        L.append("")

    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(L))
    if problems:
        print("bench: %d problem(s):" % len(problems), file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        sys.exit(1)


# (column, source) of the per-run ratios against nobgw of the same round
NOBGW_RATIOS = [("total_vs_nobgw_same_round", "total_writes"),
                ("tps_vs_nobgw", "tps"), ("p99_vs_nobgw", "lat_p99_ms"),
                ("wpx_vs_nobgw", "writes_per_xact_indep"),
                ("dfw_vs_nobgw", "backend_dfw_share"),
                ("write_s_vs_nobgw", "backend_write_s")]

WORKLOADS = {
    "update": "seed 001's update-only script",
    "tpcb": "pgbench's built-in TPC-B-like script, pgbench_history "
            "truncated before each run",
    "insert": "INSERT ... SELECT of 100 rows per transaction into an "
              "append-only table, truncated before each run"}


def configs_section(rows):
    """Each configuration's description and the cleaner settings the
    server reported after its restart (first run)."""
    seen, L = {}, []
    for r in rows:
        seen.setdefault(r["config"], r)
    L.append("## Configurations (settings as the server reported them)")
    L.append("")
    for cfg, r in seen.items():
        L.append("- `%s`: %s; cleaner: %s%s" % (
            cfg, r["info"], r["cleaner"],
            "; bgw_jit: " + r["jit_settings"] if r.get("jit_settings")
            else ""))
    L.append("")
    return L


def zero_section(configs, groups, clients):
    """Issue 10's table: every configuration against no cleaner."""
    have_nobgw = any(("nobgw", c) in groups for c in clients)
    t = []
    for cfg in configs:
        for c in clients:
            rs = groups.get((cfg, c))
            if rs:
                t.append((cfg, c, med_span(rs, "tps_vs_nobgw", 3),
                          med_span(rs, "p99_vs_nobgw", 3),
                          med_span(rs, "wpx_vs_nobgw", 3),
                          med_span(rs, "cleaner_pct_indep", 2),
                          fmt(med(rs, "cleaner_pct_indep_evict"), 2),
                          fmt(med(rs, "cleaner_pct"), 2),
                          fmt(med(rs, "cleaner_wakeups_per_s"), 1),
                          fmt(med(rs, "cleaner_cpu_pct"), 2), len(rs)))
    L = ["## Against no cleaner (issue 10)", "",
         "Per run, each figure over nobgw's in the same round at the same "
         "client count; the median over rounds [min–max]. *tps ratio*: "
         "pgbench's tps; *p99 ratio*: the per-transaction log's 99th "
         "percentile latency; *writes/xact ratio*: total writes per "
         "transaction from the independent counts (cleaner + backends + "
         "checkpointer, below). *cleaner_pct_indep* = 100 × cleaner / "
         "(cleaner + backends) from counts bgw_jit does not produce: the "
         "cleaning processes' `/proc/PID/io` wchar / 8192 and "
         "`pg_stat_statements.shared_blks_written`; *of evictions*: the "
         "same without the backends' relation extensions, which PostgreSQL "
         "15 counts as writes and no cleaner can take (their number is in "
         "the next table); *cleaner_pct (extension)* is "
         "`bgw_jit_stats`' own figure (`pg_stat_bgwriter`'s for core's "
         "writer), whose backend count includes extensions too. "
         "*wakeups/s*: the cleaning processes' context switches (voluntary "
         "+ involuntary) per second; *cleaner CPU %*: their CPU time over "
         "the run (one core = 100).", ""]
    if not have_nobgw:
        L += ["(No nobgw runs: the ratios need nobgw in `--configs`.)", ""]
    L += [md_table(("config", "clients", "tps ratio", "p99 ratio",
                    "writes/xact ratio", "cleaner_pct_indep",
                    "of evictions", "cleaner_pct (extension)", "wakeups/s",
                    "cleaner CPU %", "rounds"), t), ""]
    return L


def waits_section(configs, groups, clients):
    """--io-waits: what the backends waited for, against no cleaner."""
    t = []
    for cfg in configs:
        for c in clients:
            rs = groups.get((cfg, c))
            if rs and any(r.get("backend_dfw_share") for r in rs):
                t.append((cfg, c, med_span(rs, "backend_dfw_share", 3),
                          med_span(rs, "dfw_vs_nobgw", 3),
                          med_span(rs, "backend_write_s", 1),
                          med_span(rs, "write_s_vs_nobgw", 3),
                          fmt(med(rs, "waits_samples_per_s")), len(rs)))
    if not t:
        return []
    return ["## What the backends waited for (`--io-waits`)", "",
            "*DataFileWrite share*: of the active client backends' samples "
            "in `pg_stat_activity` (about 50 a second), the share waiting in "
            "`IO:DataFileWrite`; *write time*: the client backends' "
            "`pg_stat_io.write_time` over the run, seconds (16 and later, "
            "`track_io_timing = on`). Ratios over nobgw in the same round; "
            "medians over rounds [min–max].", "",
            md_table(("config", "clients", "DataFileWrite share",
                      "× nobgw", "write time s", "× nobgw", "samples/s",
                      "rounds"), t), ""]


def counts_section(configs, groups, clients):
    """The independent write counts and the cleaner's costs (medians)."""
    cold = [num(r.get("unused_buffers_at_start")) or 0
            for rs in groups.values() for r in rs]
    cold = [x for x in cold if x > 0]
    note = []
    if cold:
        note = ["%d run(s) started with free buffers (holding no page: "
                "unused since the restart, or emptied by a TRUNCATE; at "
                "most %d): until those ran out, backends evicted nothing "
                "(`unused_buffers_at_start` in results.csv; `--warmup` "
                "fills the pool first)." % (len(cold), max(cold)), ""]
    # (column, digits, divisor) of each cell: medians over rounds
    cols = [("alloc_laps", 1, 1), ("backend_pgss", 0, 1),
            ("backend_extend", 0, 1),
            ("cleaner_wchar_pages", 0, 1), ("cleaner_syscw", 0, 1),
            ("cleaner_wchar_quiet_pages", 0, 1), ("cleaner_own_quiet", 0, 1),
            ("cleaner_wchar_minus_own", 0, 1),
            ("checkpointer_wchar_pages", 0, 1),
            ("writes_per_xact_indep", 3, 1), ("cleaner_pct_indep_evict", 2, 1),
            ("cleaner_cpu_us_per_page", 1, 1), ("cleaner_vmrss_kb", 1, 1024),
            ("cleaner_rssanon_kb", 1, 1024)]
    t = []
    for cfg in configs:
        for c in clients:
            rs = groups.get((cfg, c))
            if rs:
                t.append([cfg, c] + [
                    fmt(None if med(rs, k) is None else med(rs, k) / div, d)
                    for k, d, div in cols])
    return ["## Independent write counts and the cleaner's costs (medians)",
            "",
            "*pool laps*: buffers allocated during the run "
            "(`pg_stat_bgwriter.buffers_alloc`) over `shared_buffers`: "
            "below 1, the clock hand met only pages cleaned by the "
            "CHECKPOINT before the run or dirtied before it (see "
            "`--warmup`). *backends*: the rise of `sum(shared_blks_written)` in "
            "`pg_stat_statements` (reset before each run; every statement "
            "tracked, planning included). PostgreSQL 15 counts there both "
            "the dirty buffers a backend writes out and each block it adds "
            "to a relation; *extensions* is the growth in blocks of the "
            "user relations over the run, i.e. the second kind, which "
            "no cleaner can take. *cleaner wchar/8192*: the bytes the "
            "cleaning processes (bgw_jit's worker, its writers and core's "
            "writer) passed "
            "to write calls, from `/proc/PID/io`, in pages, over pgbench's "
            "span; it includes any WAL they flushed themselves before "
            "writing a page (XLogFlush). *write calls* is their syscw: a "
            "data page is one call, a WAL flush one call for one or more "
            "pages, so wchar/8192 − write calls ≤ WAL pages. *Until quiet*: "
            "from the start of the run to 1.5 s after its end, when the "
            "cleaner has gone quiet and published every write, the "
            "cleaners' wchar/8192 and their *own count* "
            "(`bgw_jit_stats.buf_clean` + `buf_all_clean`, plus "
            "`pg_stat_bgwriter.buffers_clean`), each pair read by the "
            "server in one statement, own count first; the *difference* is "
            "the WAL the cleaner flushed itself, plus any bgw_jit cycle "
            "still unpublished (negative: the cleaner counted writes the "
            "kernel did not see). "
            "*checkpointer*: its "
            "wchar / 8192 (data pages, "
            "plus pg_control, SLRU pages and WAL it wrote). *writes/xact*: "
            "(cleaner + backends + checkpointer) / transactions. *pct of "
            "evictions*: cleaner / (cleaner + backends − extensions). "
            "*CPU µs/page*: the cleaner's CPU time over the run per "
            "page of wchar/8192. Memory: VmRSS and RssAnon of the cleaning "
            "process at the end of the run (VmRSS includes the shared "
            "buffers it touched).", "",
            md_table(("config", "clients", "pool laps", "backends",
                      "extensions",
                      "cleaner wchar/8192", "write calls",
                      "until quiet: wchar/8192", "own count", "difference",
                      "checkpointer", "writes/xact",
                      "pct of evictions", "CPU µs/page", "VmRSS MB",
                      "RssAnon MB"), t), ""] + note


def idle_section(idles):
    groups = {}
    for r in idles:
        groups.setdefault(r["config"], []).append(r)
    t = []
    for cfg, rs in groups.items():
        t.append((cfg, rs[0]["cleaner"],
                  med_span(rs, "cleaner_wakeups_per_s", 2),
                  med_span(rs, "cleaner_cpu_pct", 3),
                  fmt(med(rs, "jit_cycles_per_s"), 2),
                  fmt(med(rs, "jit_hibernations")),
                  fmt(med(rs, "cleaner_wchar_pages")),
                  fmt(med(rs, "bgwriter_wakeups_per_s"), 2),
                  fmt(None if med(rs, "cleaner_vmrss_kb") is None
                      else med(rs, "cleaner_vmrss_kb") / 1024, 1),
                  len(rs)))
    r0 = idles[0]
    return ["## Idle", "",
            "Per configuration and round: restart, CHECKPOINT, %s s of the "
            "workload at 1 client (so the pool is in use and the cleaner "
            "has just been busy), 1 s, then %s s with no load and no "
            "queries. Over that window (median [min–max] over rounds): the "
            "cleaning process's wake-ups per second (context switches, "
            "voluntary + involuntary, `/proc/PID/status`), its CPU %% "
            "(100 = one core), bgw_jit's cycles per second "
            "and hibernations (`bgw_jit_stats`), the pages it wrote "
            "(wchar / 8192), core's writer's wake-ups (it runs in every "
            "configuration) and the cleaner's VmRSS at the end."
            % (r0.get("idle_warmup_s"), r0.get("idle_s")), "",
            md_table(("config", "cleaner", "wake-ups/s", "CPU %",
                      "bgw_jit cycles/s", "hibernations", "pages written",
                      "core writer wake-ups/s", "VmRSS MB", "rounds"), t),
            ""]


HOW_MEASURED = """\
How the figures are measured (identically for every configuration):
every configuration preloads `pg_stat_statements` (`track = all`,
`track_planning = on`). Before each run: the workload's append table
truncated, a CHECKPOINT, a reload and 1.5 s of settling, then
`pg_stat_reset_shared('bgwriter')`, `pg_stat_statements_reset()` and
`bgw_jit_reset()`; `/proc` of bgw_jit's worker and writers, core's
background writer and the checkpointer (pids from `pg_stat_activity`,
bgw_jit's from their process titles in `/proc`, asked again every run)
is read just before pgbench starts (`-n -c C -j C -T D -P 1 -l`) and just
after it ends, then `pg_stat_statements` (and the user relations'
sizes, for the extensions). Then one statement reads the cleaners' own
counters and sends `pg_reload_conf()`, which makes the checkpointer fold
the backends' write counts into `buffers_backend`; 1.5 s later
`buffers_backend` and the allocation counts are read.

Independent counts (issue 10): backends' writes = the rise of
`sum(pg_stat_statements.shared_blks_written)`; the cleaner's = `wchar` /
8192 of bgw_jit's worker and writers plus core's writer; the
checkpointer's likewise;
`cleaner_pct_indep = 100 * cleaner / (cleaner + backends)`;
`writes_per_xact_indep = (cleaner + backends + checkpointer) /
transactions`. The cleaner's CPU time (`/proc/PID/schedstat`'s time on
CPU, in ns: the total that `stat`'s utime + stime give in 10 ms ticks,
which are used where schedstat is missing), wake-ups (voluntary +
involuntary context switches, `/proc/PID/status`) and memory (VmRSS,
RssAnon) are those of bgw_jit's worker when it is loaded, else of core's
writer.

The cleaners' own counters: buf_clean/buf_alloc/maxwritten_clean come from
`bgw_jit_stats` when bgw_jit ran, else from `pg_stat_bgwriter`;
buf_backend is `buffers_backend`, minus bgw_jit's own writes up to the
reload when it ran (the view's formula, taken at one moment: see below);
checkpoint writes are `buffers_checkpoint` (completed checkpoints only);
`cleaner_pct = 100 * buf_clean / (buf_clean + buf_backend)`. tps is
pgbench's (without connection time); latency mean and p99 come from the
per-transaction log. Every run's figures are in `results.csv`, its series
in `series/`, its raw reads in `raw/`.
"""


# An auto_explain entry in server.log (bench/run logs in UTC): its time, and
# the top plan node's buffer counts (which include its children's).
AUTO_EXPLAIN_RE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[\d+\] LOG:  "
    r"duration: ([\d.]+) ms  plan:\n(?:\t.*\n)*?\t  Buffers: shared ([^\n]*)",
    re.M)


def long_statements_section(outdir, rows):
    """Statements auto_explain logged during each run (bench/run --set
    session_preload_libraries=auto_explain ...; server.log is copied into
    the results): how many, the pages they read and wrote, and their share
    of the run's backend writes (pg_stat_statements).  Nothing without
    such entries."""
    path = os.path.join(outdir, "server.log")
    if not os.path.exists(path):
        return []
    entries = []
    for m in AUTO_EXPLAIN_RE.finditer(open(path, errors="replace").read()):
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(
            tzinfo=timezone.utc).timestamp()
        counts = dict((k, int(v)) for k, v in
                      re.findall(r"(\w+)=(\d+)", m.group(3)))
        entries.append((t, float(m.group(2)), counts))
    if not entries:
        return []
    t = []
    for r in rows:
        raw = os.path.join(outdir, "raw", r["run_id"])
        t0 = num(read_env(os.path.join(raw, "proc0.env")).get("t"))
        t1 = num(read_env(os.path.join(raw, "proc1.env")).get("t"))
        if None in (t0, t1):
            continue
        inrun = [e for e in entries if t0 <= e[0] <= t1]
        written = sum(e[2].get("written", 0) for e in inrun)
        backends = num(r.get("backend_pgss"))
        t.append([r["config"], r["clients"], r["round"], fmt(backends),
                  str(len(inrun)),
                  fmt(max([e[1] for e in inrun], default=None), 1),
                  fmt(sum(e[2].get("read", 0) for e in inrun)),
                  fmt(written),
                  fmt(100.0 * written / backends, 1) if backends else "–"])
    return ["## Long statements (auto_explain)", "",
            "Every statement `auto_explain` logged (server.log) between a "
            "run's two /proc reads, per run: *pages read* and *pages "
            "written* are its top plan node's `Buffers: shared read` and "
            "`written` (the buffers it read in and the dirty buffers it "
            "wrote out itself to make room), summed over the statements; "
            "*share* is their writes over the run's backend writes from "
            "`pg_stat_statements`.", "",
            md_table(["config", "clients", "round", "backend writes",
                      "statements", "longest ms", "pages read",
                      "pages written", "share %"], t), ""]


def alloc_section(rows, configs, groups, clients):
    """bgw_jit's allocation count against pg_stat_bgwriter's."""
    t = []
    for cfg in configs:
        for c in clients:
            rs = [r for r in groups.get((cfg, c), [])
                  if r["cleaner"] == "bgw_jit"]
            if rs:
                t.append((cfg, c, fmt(med(rs, "jit_buf_alloc")),
                          fmt(med(rs, "stat_buffers_alloc")),
                          fmt(med(rs, "jit_alloc_vs_stat_pct"), 2),
                          fmt(med(rs, "buf_backend")),
                          fmt(med(rs, "jit_buf_backend_view"))))
    if not t:
        return []
    return ["## bgw_jit's counts against core's (medians)", "",
            "`bgw_jit_stats.buf_alloc` against "
            "`pg_stat_bgwriter.buffers_alloc` over the whole run. "
            "*buf_backend used* is the view's formula evaluated at the "
            "settling reload: `buffers_backend` once the checkpointer has "
            "absorbed the counts up to the reload, minus the worker's "
            "`buf_clean` read with the reload. The view itself, read 1.5 s "
            "later, also subtracts the worker's writes made after that "
            "absorb, which `buffers_backend` does not hold yet, so it reads "
            "low by them.", "",
            md_table(("config", "clients", "jit buf_alloc", "buffers_alloc",
                      "diff %", "buf_backend used", "view, read after settling"), t),
            ""]


def accuracy_section(rows, configs, groups, clients):
    t = []
    for cfg in configs:
        for c in clients:
            rs = [r for r in groups.get((cfg, c), [])
                  if r.get("acc_complete") == "1"
                  and (num(r.get("history_size")) or 0) >= 100000]
            if rs:
                t.append((cfg, c, fmt(med(rs, "delay_ms")),
                          fmt(med(rs, "acc_cycles")),
                          fmt(med(rs, "acc_credited")),
                          fmt(med(rs, "acc_reported")),
                          fmt(med(rs, "acc_rel_err_pct"), 3),
                          fmt(med(rs, "acc_windows")),
                          fmt(med(rs, "acc_cycles_per_window"), 1),
                          fmt(med(rs, "acc_mae_window"), 1),
                          fmt(med(rs, "acc_mae_cycle"), 2),
                          fmt(med(rs, "acc_mae_cycle_pct"), 1),
                          fmt(med(rs, "acc0_mae_window"), 1),
                          fmt(med(rs, "acc0_mae_cycle_pct"), 1)))
    if not t:
        return []
    return ["## Estimator accuracy (allocations credited per cycle)", "",
            ACCURACY_METHOD, "",
            md_table(("config", "clients", "delay ms", "cycles", "credited",
                      "reported", "total err %", "windows",
                      "cycles/window", "MAE/window", "MAE/cycle",
                      "% of mean alloc/cycle", "same-report MAE/window",
                      "same-report %"), t), ""]


ACCURACY_METHOD = """\
Configurations with `bgw_jit.history_size = 100000`, so that
`bgw_jit_history` holds every cycle of the run (medians over rounds).
The true allocations of a single cycle are not observable without patching
core: the only exact count is `pg_stat_bgwriter.buffers_alloc`, which the
built-in writer takes and publishes about every 200 ms (its
`bgwriter_delay`). The history's `alloc_reported` is that counter's
increase seen by each cycle, `recent_alloc` what the worker credited to the
cycle (what its estimate used). *credited* and *reported* are the sums
over the history, *total err* their relative difference.

Per window: the history is split at the cycles where a report arrived
(`alloc_reported > 0`); a window runs from one such cycle up to, not
including, the next. The allocations credited over a window are compared
with the report that arrives at the start of the following window (a
report counts allocations made before it arrives); the last window, which
has no following report, is dropped. *MAE/window* is the mean absolute
difference, *MAE/cycle* that divided by the mean window length in cycles,
and *% of mean alloc/cycle* puts it against the reported allocations per
cycle over the same windows. The window edges are fuzzy by up to one
worker cycle (the built-in writer's cycle falls somewhere inside one of
ours), which is negligible at 10 ms (about 20 cycles per report) but not at
200 ms: there both processes cycle every 200 ms, each window is one cycle,
and their phase decides whether a report covers the worker's previous cycle
or the one before. The *same-report* columns therefore also compare each
window with the report at its own start. The worker credits a report in
the cycle it arrives and now-casts only the clock hand's movement since, so
at 200 ms the same-report error mostly shows that the credit is the lagged
counter itself. Errors can cancel within a window: these are lower bounds
of a true per-cycle error."""


def step_section(steps):
    groups = {}
    for r in steps:
        groups.setdefault(r["config"], []).append(r)
    cell = med_span

    def bounds(rs, w):
        lo, hi = med(rs, "backend_%s_lo" % w), med(rs, "backend_" + w)
        if lo is None or hi is None or round(lo) == round(hi):
            return fmt(hi)
        return "%s–%s" % (fmt(lo), fmt(hi))

    t, at = [], {w: [] for w in "125"}
    for cfg, rs in groups.items():
        for w in "125":
            at[w] += [num(r.get("at_%s_s" % w)) for r in rs]
        t.append((cfg, rs[0]["info"], bounds(rs, "1"), bounds(rs, "2"),
                  bounds(rs, "5"),
                  cell(rs, "backend_total"), cell(rs, "first_clean_s", 2),
                  cell(rs, "react90_s", 2),
                  cell(rs, "steady_clean_per_s"),
                  cell(rs, "jit_first_active_s", 2), str(len(rs))))
    ab = [num(r.get("absorb_ms")) for r in steps if num(r.get("absorb_ms"))]
    mean_absorb = sum(ab) / len(ab) if ab else float("nan")
    mean_at = {w: (sum(x for x in v if x is not None) /
                   max(1, len([x for x in v if x is not None])))
               for w, v in at.items()}
    return ["## Load step: reaction after idling", "",
            "The server sat idle for %s s after a CHECKPOINT (longer than "
            "bgw_jit's 1 s idle back-off and core's hibernation), counters "
            "were reset, then 2 clients ran the update load for 10 s. Time 0 "
            "is the first transaction's start (per-transaction log). Backend "
            "writes by time t: at t a `pg_reload_conf()` makes the "
            "checkpointer absorb the backends' write counts, and "
            "`buffers_backend` is polled every millisecond until the absorb "
            "shows (mean %.1f ms); bgw_jit's own writes, which core counts "
            "as backend writes, are read before the reload and, after the "
            "absorb, once the worker's cycle running at the absorb has been "
            "published (it publishes at the end of a cycle); subtracting "
            "them bounds the backends' writes (lo–hi: the worker's writes "
            "during the absorb's latency and that cycle). "
            "Mean actual t: %.2f s, %.2f s, %.2f s. The cleaner's "
            "counter (`bgw_jit_stats.buf_clean` or "
            "`pg_stat_bgwriter.buffers_clean`) was sampled every 100 ms: "
            "*first clean* is the first sample after 0 where it rose (after a "
            "CHECKPOINT nothing ahead of the clock hand is dirty until the "
            "sweep reaches pages the load dirtied, so this is partly the "
            "workload's doing), "
            "*90%% at* the first sample whose 0.5 s trailing rate reached 90%% "
            "of the steady rate (5–9.5 s). *worker active* is bgw_jit's first "
            "history cycle after 0 that counted allocations (the idle "
            "back-off's delay). Medians [min–max] over rounds."
            % (groups and list(groups.values())[0][0].get("idle_s"),
               mean_absorb, mean_at["1"], mean_at["2"], mean_at["5"]), "",
            md_table(("config", "info", "backend writes by ~1 s", "~2 s",
                      "~5 s", "whole 10 s", "first clean s", "90% at s",
                      "steady cleaned/s", "worker active s", "rounds"), t),
            ""]


def grid_plot(outdir, term, rows, configs, groups, clients, problems):
    """cleaner_pct vs multiplier, one line per delay x client count, for
    bgw_jit configurations at smoothing 16 with maxpages >= 1000."""
    pts = {}
    for (cfg, c), rs in groups.items():
        r0 = rs[0]
        m, p = num(r0["multiplier"]), med(rs, "cleaner_pct")
        # (a multiplier may be 'auto': not a point on this plot)
        if r0["strategy"] != "jit" or num(r0["smoothing"]) != 16 \
                or (num(r0["maxpages"]) or 0) < 1000 or None in (m, p):
            continue
        pts.setdefault((num(r0["delay_ms"]), c), []).append((m, p))
    if not pts:
        return None
    ms = [m for v in pts.values() for m, _ in v]
    dat = os.path.join(outdir, "plots", "cleaner_pct_vs_multiplier.dat")
    plots, idx = [], 0
    with open(dat, "w") as f:
        for (delay, c) in sorted(pts):
            f.write("# delay %s ms, %d clients\n" % (fmt(delay), c))
            for m, p in sorted(pts[(delay, c)]):
                f.write("%s %s\n" % (m, p))
            f.write("\n\n")
            plots.append("%s index %d using 1:2 with linespoints lw 1.5 "
                         "dt %d title %s"
                         % (gp_quote(os.path.relpath(dat, outdir)), idx,
                            1 if delay <= 10 else 2,
                            gp_quote("%s ms, %d client%s" % (
                                fmt(delay), c, "" if c == 1 else "s"))))
            idx += 1
    script = ("set terminal %s noenhanced\n"
              "set output 'cleaner_pct_vs_multiplier.png'\n"
              "set key outside right\nset grid\n"
              "set title 'bgw_jit cleaner_pct vs lru_multiplier (smoothing "
              "16, maxpages 1000; medians)'\nset xlabel 'bgw_jit.lru_multiplier'"
              "\nset ylabel 'cleaner_pct'\nset xrange [%s:%s]\n"
              "set offsets 0, 0, graph 0.1, graph 0.1\nplot %s\n"
              % (term, min(ms) - 0.5, max(ms) + 0.5, ", ".join(plots)))
    return "cleaner_pct_vs_multiplier.png" if run_gnuplot(
        outdir, "cleaner_pct_vs_multiplier", script, problems) else None


def step_plot(outdir, term, steps, problems):
    firsts = {}
    for r in steps:
        if r["cleaner"] != "none" and r["config"] not in firsts:
            firsts[r["config"]] = r["run_id"]
    blocks = [(cfg, os.path.join(outdir, "series", rid + "_step.csv"), 1, 3)
              for cfg, rid in firsts.items()]
    if not blocks:
        return None
    return series_plot(outdir, term, "step_clean_rate",
                       "load step after idling: buffers cleaned per second "
                       "(0.5 s trailing rate, first round)",
                       "buffers cleaned / s", blocks, problems,
                       xrange="-1:12")


COMMANDS = {"configs": (cmd_configs, 2), "config-lines": (cmd_config_lines, 2),
            "config-info": (cmd_config_info, 2),
            "preload-line": (cmd_preload_line, 1),
            "run-figures": (cmd_run_figures, 2),
            "step-figures": (cmd_step_figures, 2),
            "idle-figures": (cmd_idle_figures, 2), "report": (cmd_report, 1)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS \
            or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        die("usage: bench.py {%s} ARGS (see the docstring)"
            % "|".join(COMMANDS))
    COMMANDS[sys.argv[1]][0](sys.argv[2:])
