#!/usr/bin/env python3
"""bench/latency_diag.py - sampler and report of bench/latency-diag.

sample: during one pgbench run, read /proc (schedstat, status) of the
pgbench backends, pgbench's threads and the bgw_jit worker once the clients
have connected and once more a second before the end, and sample
pg_stat_activity every --sample-ms through one psql \\watch in between.

report: per run, from pgbench's per-transaction log, the /proc snapshots,
the samples and bgw_jit_history, the figures of summary.md (see the
script's header); per configuration the median and range over rounds.
"""

import argparse
import bisect
import csv
import glob
import gzip
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import median, read_env  # noqa: E402  (shared with bench/run)

PROC_COLS = ["role", "pid", "tid", "run_ns", "delay_ns", "vcsw", "nvcsw"]


def psql_cmd(a):
    cmd = [a.psql, "-X", "-q", "-At", "-F", "|", "-h", a.host, "-p",
           str(a.port), "-d", "postgres"]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", a.user, "--"] + cmd
    return cmd


def query(a, sql):
    return subprocess.run(psql_cmd(a) + ["-c", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def task_figures(pid, tid):
    base = "/proc/%d/task/%d" % (pid, tid)
    with open(base + "/schedstat") as f:
        run_ns, delay_ns, _ = f.read().split()
    vcsw = nvcsw = 0
    with open(base + "/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                vcsw = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                nvcsw = int(line.split()[1])
    return [int(run_ns), int(delay_ns), vcsw, nvcsw]


def snapshot(procs):
    """procs: list of (role, pid); every thread of each."""
    rows = []
    for role, pid in procs:
        try:
            tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                rows.append([role, pid, tid] + task_figures(pid, tid))
            except (FileNotFoundError, ValueError, ProcessLookupError):
                pass
    return rows


def wchar(pid):
    """Bytes process pid passed to write calls (0 without a pid)."""
    if not pid:
        return 0
    with open("/proc/%s/io" % pid) as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def cleaner_pids(worker):
    """bgw_jit's worker and its writer processes: the postmaster's children
    titled "bgw_jit writer N" (bgw_jit.max_writers)."""
    if not worker:
        return []
    pids = [int(worker)]
    try:
        with open("/proc/%s/stat" % worker) as f:
            pm = f.read().rsplit(")", 1)[1].split()[1]
        with open("/proc/%s/task/%s/children" % (pm, pm)) as f:
            children = f.read().split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return pids
    for c in children:
        try:
            with open("/proc/%s/cmdline" % c) as f:
                if "bgw_jit writer" in f.read():
                    pids.append(int(c))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return pids


def cleaners_wchar(pids):
    """Bytes the cleaning processes passed to write calls, together."""
    return sum(wchar(p) for p in pids)


def kernel_state(pid):
    """'R', or 'S:<wchan>' / 'D:<wchan>' for a sleeping process."""
    if not pid:
        return None
    try:
        with open("/proc/%s/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state == "R":
            return "R"
        with open("/proc/%s/wchan" % pid) as f:
            return "%s:%s" % (state, f.read().strip() or "?")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def pgbench_pids():
    pids = []
    for d in glob.glob("/proc/[0-9]*/comm"):
        try:
            with open(d) as f:
                if f.read().strip() == "pgbench":
                    pids.append(int(d.split("/")[2]))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return pids


def cmd_sample(a):
    start = time.time()
    deadline = start + 15
    backends = []
    while time.time() < deadline:
        out = query(a, "SELECT pid FROM pg_stat_activity "
                       "WHERE application_name = 'pgbench' "
                       "AND backend_type = 'client backend'")
        backends = [int(x) for x in out.split()] if out else []
        if len(backends) >= 1 and len(pgbench_pids()) >= 1:
            # all clients connect at once; give the rest a moment
            time.sleep(0.3)
            out = query(a, "SELECT pid FROM pg_stat_activity "
                           "WHERE application_name = 'pgbench' "
                           "AND backend_type = 'client backend'")
            backends = [int(x) for x in out.split()]
            break
        time.sleep(0.05)
    if not backends:
        sys.exit("latency_diag.py: no pgbench backends appeared")
    worker = query(a, "SELECT pid FROM bgw_jit_stats")
    procs = [("backend", p) for p in backends]
    procs += [("pgbench", p) for p in pgbench_pids()]
    if worker:
        procs.append(("worker", int(worker)))
    counts_sql = ("SELECT coalesce(sum(shared_blks_written), 0) "
                  "FROM pg_stat_statements")
    t_a = time.time()
    snap_a = snapshot(procs)
    cleaners = cleaner_pids(worker)
    counts_a = (query(a, counts_sql), cleaners_wchar(cleaners))
    watch_sql = (
        "SELECT extract(epoch FROM clock_timestamp()), pid, backend_type, "
        "coalesce(wait_event_type, 'CPU'), coalesce(wait_event, '-'), "
        "coalesce(state, '-') FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND (application_name = 'pgbench' "
        "OR backend_type <> 'client backend') \\watch %g\n"
        % (a.sample_ms / 1000.0))
    waits = open(os.path.join(a.dir, "waits.txt"), "w")
    watcher = subprocess.Popen(psql_cmd(a), stdin=subprocess.PIPE,
                               stdout=waits, stderr=subprocess.DEVNULL,
                               text=True)
    watcher.stdin.write(watch_sql)
    watcher.stdin.flush()
    end = a.t0 + a.duration - 1.0
    # the worker's scheduler state and, asleep, the kernel function it
    # sleeps in (balance_dirty_pages: throttled for dirtying the page
    # cache), every 5 ms: things pg_stat_activity cannot show
    kstates = {}
    while time.time() < end:
        st = kernel_state(worker)
        if st:
            kstates[st] = kstates.get(st, 0) + 1
        time.sleep(0.005)
    with open(os.path.join(a.dir, "kstates.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["state", "samples"])
        for k, v in sorted(kstates.items(), key=lambda kv: -kv[1]):
            w.writerow([k, v])
    t_b = time.time()
    snap_b = snapshot(procs)
    counts_b = (query(a, counts_sql), cleaners_wchar(cleaners))
    with open(os.path.join(a.dir, "writes.env"), "w") as f:
        f.write("backend_a=%s\nworker_wchar_a=%s\n"
                "backend_b=%s\nworker_wchar_b=%s\n"
                % (counts_a + counts_b))
    watcher.terminate()
    watcher.wait()
    waits.close()
    sys.stderr.write("latency_diag.py: window %.2f-%.2f s after pgbench "
                     "started\n" % (t_a - a.t0, t_b - a.t0))
    with open(os.path.join(a.dir, "procs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["snap", "t"] + PROC_COLS)
        for snap, t, rows in (("a", t_a, snap_a), ("b", t_b, snap_b)):
            for r in rows:
                w.writerow([snap, "%.6f" % t] + r)


def cmd_alternate(a):
    """Switch configurations every --phase seconds during one load; note
    each phase's start and end and the write counts at both."""
    cleaners = cleaner_pids(query(a, "SELECT pid FROM bgw_jit_stats"))
    counts_sql = ("SELECT coalesce(sum(shared_blks_written), 0) "
                  "FROM pg_stat_statements")
    rows = []
    t = a.t0 + 1.0
    i = 0
    while t + a.phase <= a.t0 + a.duration - 0.5:
        name, settings = a.configs[i % len(a.configs)].split("=", 1)
        with open(a.conf, "w") as f:
            f.write(settings.replace(";", "\n") + "\n")
        query(a, "SELECT pg_reload_conf()")
        start = time.time()
        c0 = (int(query(a, counts_sql)), cleaners_wchar(cleaners))
        t += a.phase
        time.sleep(max(0.0, t - time.time()))
        end = time.time()
        c1 = (int(query(a, counts_sql)), cleaners_wchar(cleaners))
        rows.append([i, name, "%.6f" % start, "%.6f" % end,
                     c1[0] - c0[0], (c1[1] - c0[1]) / 8192.0])
        i += 1
    with open(a.conf, "w") as f:
        f.write("")
    query(a, "SELECT pg_reload_conf()")
    with open(os.path.join(a.dir, "phases.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "config", "start", "end", "backend_writes",
                    "worker_pages"])
        w.writerows(rows)


def cmd_report_phases(a):
    """Per phase, after its first --settle seconds: tps, p99 and the share
    cleaned; each configuration's phase over the reference's phases just
    before and after it (their mean), median [range] over the turns."""
    meta = read_env(os.path.join(a.out, "meta.env"))
    run = os.path.join(a.out, "raw", "alternate")
    xacts = read_transactions(run)
    ends = [x[1] for x in xacts]
    order = sorted(range(len(xacts)), key=lambda k: xacts[k][1])
    ends_sorted = [xacts[k][1] for k in order]
    with open(os.path.join(run, "phases.csv")) as f:
        phases = list(csv.DictReader(f))
    figs = []
    for p in phases:
        s = float(p["start"]) + a.settle
        e = float(p["end"])
        lo = bisect.bisect_left(ends_sorted, s)
        hi = bisect.bisect_right(ends_sorted, e)
        lats = sorted(xacts[order[k]][2] for k in range(lo, hi))
        if len(lats) < 100:
            # too short to say anything (the first phase, when the
            # reload took longer than the lead-in)
            continue
        bw = int(p["backend_writes"])
        ww = float(p["worker_pages"])
        figs.append({
            "phase": p["phase"],
            "config": p["config"],
            "tps": len(lats) / (e - s),
            "p99": percentile(lats, 99) / 1000.0,
            "mean": sum(lats) / len(lats) / 1000.0,
            "cleaned": 100.0 * ww / (ww + bw) if ww + bw else None,
        })
    # per phase, so that the ratios can be checked without pgbench's log
    write_csv(os.path.join(a.out, "phases.csv"),
              ["phase", "config", "tps", "p99", "mean", "cleaned"], figs)
    names = []
    for f in figs:
        if f["config"] not in names:
            names.append(f["config"])
    ref = a.reference

    def neighbours(i):
        """The reference's phases nearest before and after phase i."""
        out = []
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(figs) and figs[j]["config"] != ref:
                j += step
            if 0 <= j < len(figs):
                out.append(figs[j])
        return out

    lines = ["# Tail latency, configurations alternating in one load "
             "(bench/latency-diag --phase)", ""]
    lines.append("Command: `%s`  " % meta.get("cmdline", "?"))
    lines.append("Finished %s; %s; %s cores, kernel %s  " % (
        meta.get("date"), meta.get("version", "?").split(" on ")[0],
        meta.get("nproc"), meta.get("kernel")))
    lines.append(
        "pgbench update-only, scale %s, shared_buffers %s%s, %s clients, "
        "one %s s run after a %s s warm-up; the configurations take turns "
        "every %s s (reloaded), each phase measured after its first %g s. "
        "Ratios: a phase over the mean of the `%s` phases just before and "
        "after it, so that the machine's drift cancels; median [range] "
        "over the turns. *cleaned*: the pages of the worker and its "
        "writers (/proc/PID/io wchar / 8192) over those plus the "
        "backends' writes (pg_stat_statements) in the phase." % (
            meta["scale"], meta["shared_buffers"],
            prewarmed(meta) + direct_io(meta),
            meta["clients"], meta["duration"], meta["warmup"], meta["phase"],
            a.settle, ref))
    lines.append("")
    lines.append("| config | turns | tps | p99 ms | cleaned % | tps × | "
                 "p99 × | mean × |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name in names:
        mine = [(i, f) for i, f in enumerate(figs) if f["config"] == name]
        rt, rp, rm = [], [], []
        for i, f in mine:
            nb = neighbours(i) if name != ref else []
            if nb:
                rt.append(f["tps"] / (sum(g["tps"] for g in nb) / len(nb)))
                rp.append(f["p99"] / (sum(g["p99"] for g in nb) / len(nb)))
                rm.append(f["mean"] / (sum(g["mean"] for g in nb) / len(nb)))
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            name, len(mine), med_range([f["tps"] for _, f in mine], 0),
            med_range([f["p99"] for _, f in mine], 3),
            med_range([f["cleaned"] for _, f in mine], 2),
            med_range(rt, 3), med_range(rp, 3), med_range(rm, 3)))
    lines.append("")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def prewarmed(meta):
    """The pool's filling, as the summaries name it."""
    return " (filled by pg_prewarm after each CHECKPOINT)" \
        if meta.get("prewarm") == "1" else ""


def direct_io(meta):
    """--direct-io and --slow-device, as the summaries name them."""
    named = ""
    if meta.get("direct_io") == "1":
        named += "; data files written with direct I/O (debug_io_direct = data)"
    if meta.get("slow_device"):
        named += ("; the cluster on a device throttled to %s (bytes/s"
                  "[,writes/s]), 256 MB of page cache dirty for it"
                  % meta["slow_device"])
    return named


def med_range(xs, d):
    """'median [min–max]' of the values that are not None, d decimals."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    form = "%%.%df" % d
    if len(xs) == 1:
        return form % xs[0]
    return (form + " [" + form + "–" + form + "]") % (median(xs), min(xs),
                                                      max(xs))


def write_csv(path, cols, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def percentile(sorted_xs, p):
    if not sorted_xs:
        return None
    k = min(len(sorted_xs) - 1, int(round(p / 100.0 * (len(sorted_xs) - 1))))
    return sorted_xs[k]


def read_transactions(run):
    """(start, end, latency_us) of every transaction in pgbench's log."""
    xs = []
    for path in glob.glob(os.path.join(run, "pgbench_log*")):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 6:
                    continue
                lat = int(p[2])
                end = int(p[4]) + int(p[5]) / 1e6
                xs.append((end - lat / 1e6, end, lat))
    xs.sort()
    return xs


def proc_deltas(run):
    """Per role: sums of the counters' growth between the snapshots, over
    the threads present in both; and the window's length."""
    snaps = {"a": {}, "b": {}}
    ts = {}
    with open(os.path.join(run, "procs.csv")) as f:
        for r in csv.DictReader(f):
            key = (r["role"], r["pid"], r["tid"])
            snaps[r["snap"]][key] = r
            ts[r["snap"]] = float(r["t"])
    sums = {}
    for key, b in snaps["b"].items():
        a = snaps["a"].get(key)
        if a is None:
            continue
        s = sums.setdefault(key[0], {c: 0 for c in PROC_COLS[3:]})
        for c in PROC_COLS[3:]:
            s[c] += int(b[c]) - int(a[c])
    return sums, ts["a"], ts["b"]


def wait_shares(run):
    """Per role (backend / worker), the share of samples per wait event
    ('CPU' = active with no wait event), and the sample count."""
    counts = {}
    path = os.path.join(run, "waits.txt")
    opener = open
    if not os.path.exists(path):
        path += ".gz"		# as bench/results kept it (commit caeb989)
        opener = gzip.open
    with opener(path, "rt") as f:
        for line in f:
            p = line.rstrip("\n").split("|")
            if len(p) != 6:
                continue
            _, _, btype, wtype, wevent, state = p
            if btype == "client backend":
                role = "backend"
                if state == "idle" and wevent == "ClientRead":
                    label = "idle (ClientRead)"
                elif wtype == "CPU":
                    label = "CPU"
                else:
                    label = "%s:%s" % (wtype, wevent)
            elif btype == "bgw_jit":
                role = "worker"
                label = "CPU" if wtype == "CPU" else "%s:%s" % (wtype, wevent)
            else:
                continue
            c = counts.setdefault(role, {})
            c[label] = c.get(label, 0) + 1
    shares = {}
    for role, c in counts.items():
        n = sum(c.values())
        shares[role] = ({k: v / n for k, v in c.items()}, n)
    return shares


def worker_windows(run):
    """(start, start + cpu) of each worker cycle, sorted."""
    path = os.path.join(run, "history.csv")
    ws = []
    if os.path.exists(path):
        with open(path) as f:
            for r in csv.DictReader(f):
                s = float(r["at_epoch"])
                ws.append((s, s + int(r["cpu_us"]) / 1e6))
    ws.sort()
    return ws


def overlap_share(xacts, windows, pred):
    """Of the transactions satisfying pred, the share that overlap a
    worker cycle's [start, start + cpu]."""
    starts = [w[0] for w in windows]
    n = hit = 0
    for s, e, lat in xacts:
        if not pred(lat):
            continue
        n += 1
        i = bisect.bisect_left(starts, e) - 1
        if i >= 0 and windows[i][1] > s:
            hit += 1
    return (hit / n if n else None), n


def run_figures(run, threshold_us):
    meta = read_env(os.path.join(run, "meta.env"))
    xacts = read_transactions(run)
    sums, ta, tb = proc_deltas(run)
    in_window = [x for x in xacts if ta <= x[1] <= tb]
    n = len(in_window)
    lats = sorted(x[2] for x in xacts)
    f = {
        "config": meta["config"].split("=", 1)[0],
        "xacts": len(xacts),
        "tps": n / (tb - ta),
        "p99_ms": percentile(lats, 99) / 1000.0,
        "p999_ms": percentile(lats, 99.9) / 1000.0,
        "mean_ms": sum(lats) / len(lats) / 1000.0,
    }
    for role in ("backend", "pgbench", "worker"):
        s = sums.get(role)
        for c in PROC_COLS[3:]:
            v = s[c] if s else 0
            if c.endswith("_ns"):
                f["%s_%s_us_x" % (role, c[:-3])] = v / 1000.0 / n
            else:
                f["%s_%s_x" % (role, c)] = v / n
    w = read_env(os.path.join(run, "writes.env"))
    backend_w = int(w["backend_b"]) - int(w["backend_a"])
    worker_w = (int(w["worker_wchar_b"]) - int(w["worker_wchar_a"])) / 8192.0
    f["cleaned_pct"] = (100.0 * worker_w / (worker_w + backend_w)
                        if worker_w + backend_w else None)
    f["worker_cpu_pct"] = (sums["worker"]["run_ns"] / 1e9 / (tb - ta) * 100
                           if "worker" in sums else 0.0)
    windows = worker_windows(run)
    f["cycles"] = len(windows)
    share_all, _ = overlap_share(xacts, windows, lambda lat: True)
    share_slow, n_slow = overlap_share(xacts, windows,
                                       lambda lat: lat > threshold_us)
    f["overlap_all"] = share_all
    f["overlap_slow"] = share_slow
    f["n_slow"] = n_slow
    f["slow_share"] = n_slow / len(xacts)
    f["waits"] = wait_shares(run)
    f["kstates"] = {}
    path = os.path.join(run, "kstates.csv")
    if os.path.exists(path):
        with open(path) as fh:
            rows = list(csv.DictReader(fh))
        total = sum(int(r["samples"]) for r in rows)
        f["kstates"] = {r["state"]: int(r["samples"]) / total for r in rows}
    return f


def cmd_report(a):
    meta = read_env(os.path.join(a.out, "meta.env"))
    runs = sorted(glob.glob(os.path.join(a.out, "raw", "*_r*")))
    by_round = {}
    for run in runs:
        name, r = os.path.basename(run).rsplit("_r", 1)
        by_round.setdefault(int(r), {})[name] = run
    configs = []
    results = {}
    for r, named in sorted(by_round.items()):
        # the slow threshold: the first configuration's p99 in this round
        first = named.get(a.reference) or next(iter(named.values()))
        lats = sorted(x[2] for x in read_transactions(first))
        threshold = percentile(lats, 99)
        for name, run in named.items():
            if name not in configs:
                configs.append(name)
            f = run_figures(run, threshold)
            f["threshold_ms"] = threshold / 1000.0
            results.setdefault(name, []).append(f)
    ref = results.get(a.reference)

    def ratio_col(name, col):
        if not ref:
            return "–"
        rs = []
        for f, g in zip(results[name], ref):
            if g[col]:
                rs.append(f[col] / g[col])
        return med_range(rs, 3)

    lines = ["# Where the tail latency goes (bench/latency-diag)", ""]
    lines.append("Command: `%s`  " % meta.get("cmdline", "?"))
    lines.append("Finished %s; %s; %s cores, kernel %s  " % (
        meta.get("date"), meta.get("version", "?").split(" on ")[0],
        meta.get("nproc"), meta.get("kernel")))
    lines.append("pgbench update-only, scale %s, shared_buffers %s%s, %s "
                 "clients, %s s per run after a %s s warm-up, %s rounds "
                 "interleaved; pg_stat_activity sampled every %s ms." % (
                     meta["scale"], meta["shared_buffers"],
                     prewarmed(meta) + direct_io(meta),
                     meta["clients"],
                     meta["duration"], meta["warmup"], meta["rounds"],
                     meta["sample_ms"]))
    lines.append("")
    lines.append("Medians [range] over rounds. Per-transaction figures "
                 "(x) are the growth of /proc/PID/task/TID/schedstat and "
                 "status over the window between the snapshots, summed over "
                 "the role's threads, over the transactions that ended in "
                 "it: *run* CPU time, *delay* time runnable but waiting for "
                 "a CPU, *vcsw* voluntary context switches (blocking "
                 "waits), *nvcsw* involuntary ones (preemptions).")
    lines.append("")
    cols = [
        ("tps", "tps", 0), ("cleaned %", "cleaned_pct", 2),
        ("p99 ms", "p99_ms", 3),
        ("p99.9 ms", "p999_ms", 3), ("mean ms", "mean_ms", 3),
        ("backend run µs/x", "backend_run_us_x", 1),
        ("backend delay µs/x", "backend_delay_us_x", 1),
        ("backend vcsw/x", "backend_vcsw_x", 3),
        ("backend nvcsw/x", "backend_nvcsw_x", 3),
        ("pgbench run µs/x", "pgbench_run_us_x", 1),
        ("pgbench delay µs/x", "pgbench_delay_us_x", 1),
        ("worker run µs/x", "worker_run_us_x", 2),
        ("worker delay µs/x", "worker_delay_us_x", 2),
        ("worker nvcsw/x", "worker_nvcsw_x", 4),
        ("worker CPU %", "worker_cpu_pct", 2),
    ]
    lines.append("| config | rounds | " + " | ".join(c[0] for c in cols)
                 + " |")
    lines.append("|---" * (len(cols) + 2) + "|")
    for name in configs:
        fs = results[name]
        lines.append("| %s | %d | " % (name, len(fs)) + " | ".join(
            med_range([f[c[1]] for f in fs], c[2]) for c in cols) + " |")
    lines.append("")
    if ref:
        lines.append("Against `%s` in the same round:" % a.reference)
        lines.append("")
        lines.append("| config | tps × | p99 × | p99.9 × | mean × | "
                     "backend delay × | backend run × |")
        lines.append("|---|---|---|---|---|---|---|")
        for name in configs:
            lines.append("| %s | %s |" % (name, " | ".join(
                ratio_col(name, c) for c in (
                    "tps", "p99_ms", "p999_ms", "mean_ms",
                    "backend_delay_us_x", "backend_run_us_x"))))
        lines.append("")
    lines.append("## Slow transactions and the worker's cycles")
    lines.append("")
    lines.append("*slow*: latency above `%s`'s p99 in the same round. "
                 "*overlap*: the share of transactions whose span "
                 "(start to end, from pgbench's log) meets a worker cycle's "
                 "span (bgw_jit_history's `at` plus its `cpu_us`, a lower "
                 "bound on its wall time). If the worker's cycles cause the "
                 "slow transactions, slow ones overlap far more often than "
                 "all." % a.reference)
    lines.append("")
    lines.append("| config | slow share | overlap: all | overlap: slow | "
                 "cycles/s |")
    lines.append("|---|---|---|---|---|")
    for name in configs:
        fs = results[name]
        dur = float(meta["duration"])
        lines.append("| %s | %s | %s | %s | %s |" % (
            name, med_range([f["slow_share"] * 100 for f in fs], 2) + " %",
            med_range([f["overlap_all"] for f in fs], 3),
            med_range([f["overlap_slow"] for f in fs], 3),
            med_range([f["cycles"] / dur for f in fs], 0)))
    lines.append("")
    lines.append("## Wait events (pg_stat_activity samples)")
    lines.append("")
    lines.append("Share of samples, median over rounds: the pgbench "
                 "backends (*CPU*: active with no wait event, on a CPU or "
                 "waiting for one; *idle*: waiting for pgbench) and the "
                 "worker. Events under 0.1 % in every configuration are "
                 "left out.")
    lines.append("")
    for role in ("backend", "worker"):
        labels = set()
        for name in configs:
            for f in results[name]:
                if role in f["waits"]:
                    labels.update(k for k, v in f["waits"][role][0].items()
                                  if v >= 0.001)
        if not labels:
            continue
        labels = sorted(labels)
        lines.append("**%s**" % role)
        lines.append("")
        lines.append("| config | samples | " + " | ".join(labels) + " |")
        lines.append("|---" * (len(labels) + 2) + "|")
        for name in configs:
            fs = [f for f in results[name] if role in f["waits"]]
            if not fs:
                continue
            lines.append("| %s | %d | " % (
                name, median([f["waits"][role][1] for f in fs])) + " | ".join(
                    "%.2f %%" % (100 * median(
                        [f["waits"][role][0].get(l, 0) for f in fs]))
                    for l in labels) + " |")
        lines.append("")
    ks = {}
    for name in configs:
        for f in results[name]:
            for k, v in f["kstates"].items():
                ks.setdefault(k, 0)
    labels = sorted(k for k in ks if any(
        f["kstates"].get(k, 0) >= 0.001 for n in configs
        for f in results[n]))
    if labels:
        lines.append("**worker, kernel side** (/proc/PID/stat state and "
                     "wchan every 5 ms: *R* on a CPU or waiting for one, "
                     "*S:fn* / *D:fn* asleep in kernel function fn)")
        lines.append("")
        lines.append("| config | " + " | ".join(labels) + " |")
        lines.append("|---" * (len(labels) + 1) + "|")
        for name in configs:
            lines.append("| %s | " % name + " | ".join(
                "%.2f %%" % (100 * median(
                    [f["kstates"].get(l, 0) for f in results[name]]))
                for l in labels) + " |")
        lines.append("")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    def during_run(name):
        """A command that works on the server while pgbench runs."""
        c = sub.add_parser(name)
        c.add_argument("--dir", required=True)
        c.add_argument("--psql", required=True)
        c.add_argument("--host", required=True)
        c.add_argument("--port", type=int, required=True)
        c.add_argument("--user", required=True)
        c.add_argument("--duration", type=float, required=True)
        c.add_argument("--t0", type=float, required=True,
                       help="when pgbench started (epoch seconds)")
        return c
    s = during_run("sample")
    s.add_argument("--sample-ms", type=int, default=20)
    r = sub.add_parser("report")
    r.add_argument("--out", required=True)
    r.add_argument("--reference", default="off")
    al = during_run("alternate")
    al.add_argument("--phase", type=float, required=True)
    al.add_argument("--conf", required=True)
    al.add_argument("configs", nargs="+")
    rp = sub.add_parser("report-phases")
    rp.add_argument("--out", required=True)
    rp.add_argument("--reference", default="off")
    rp.add_argument("--settle", type=float, default=1.0)
    a = ap.parse_args()
    if a.cmd == "sample":
        cmd_sample(a)
    elif a.cmd == "alternate":
        cmd_alternate(a)
    elif a.cmd == "report-phases":
        cmd_report_phases(a)
    else:
        cmd_report(a)


if __name__ == "__main__":
    main()
