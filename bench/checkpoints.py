#!/usr/bin/env python3
"""bench/checkpoints.py - figures and plots of a bench/checkpoints run.

  checkpoints.py --run RAW   one run's directory: writes RAW/series.csv
                             (per second) and RAW/figures.csv, prints a
                             one-line summary
  checkpoints.py OUT         the whole run: results.csv (every run's
                             figures), summary.md (medians over rounds
                             [min-max], ratios against nobgw in the same
                             round) and the plots (gnuplot, PNG): one per
                             configuration (its first round) and one
                             overlay of every configuration's tps

A RAW directory holds meta.env, pgbench.out, xact.* (pgbench's
per-transaction logs), proc.csv (the sampler: cumulative wchar of the
worker, the built-in writer and the checkpointer, Dirty and Writeback
kB), checkpoints.log (the server's log_checkpoints lines of the run),
backend_writes.txt (pg_stat_statements' shared_blks_written over the
run), settings.csv, info.txt and, with bgw_jit, bgw_jit_stats.csv.

A transaction belongs to the second in which it ended; it is "inside a
checkpoint" if it ended between a checkpoint's "starting" and
"complete" lines (a checkpoint still running at the end of the run is
open to the end).  Writes are pages of 8 kB from the kernel's wchar
(bytes passed to write calls), which for the cleaners includes any WAL
they flushed themselves before writing a page.
"""
import csv
import datetime
import glob
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import read_env  # noqa: E402  (KEY=VALUE files, as bench/run writes)

PAGE = 8192


def pct(values, p):
    """The p-th percentile (nearest rank) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def parse_ts(text):
    """'2026-12-02 07:00:00.123 UTC' -> epoch seconds."""
    d = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
    return d.replace(tzinfo=datetime.timezone.utc).timestamp()


CKPT_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC .*checkpoint (starting|complete)(.*)$")


def checkpoints(raw, t1):
    """[(start, end, buffers, sync_s, write_s)] of the run's checkpoints."""
    out, start = [], None
    with open(os.path.join(raw, "checkpoints.log")) as f:
        for line in f:
            m = CKPT_RE.match(line.strip())
            if not m:
                continue
            t = parse_ts(m.group(1))
            if m.group(2) == "starting":
                start = t
            elif start is not None:
                rest = m.group(3)
                b = re.search(r"wrote (\d+) buffers", rest)
                sy = re.search(r"sync=([\d.]+) s", rest)
                wr = re.search(r"write=([\d.]+) s", rest)
                out.append((start, t, int(b.group(1)) if b else None,
                            float(sy.group(1)) if sy else None,
                            float(wr.group(1)) if wr else None))
                start = None
    if start is not None:
        out.append((start, t1, None, None, None))
    return out


def transactions(raw):
    """[(end epoch s, latency ms)] from pgbench's per-transaction logs."""
    out = []
    for path in glob.glob(os.path.join(raw, "xact.*")):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 6 or p[2] == "skipped":
                    continue
                out.append((int(p[4]) + int(p[5]) / 1e6, int(p[2]) / 1000.0))
    out.sort()
    return out


def run_figures(raw):
    meta = read_env(os.path.join(raw, "meta.env"))
    t0, t1 = float(meta["t0"]), float(meta["t1"])
    ckpts = checkpoints(raw, t1)
    xacts = transactions(raw)
    if not xacts:
        raise SystemExit("%s: no transactions logged" % raw)

    def inside(t):
        return any(s <= t <= e for s, e, *_ in ckpts)

    # per-second series, t = whole seconds since the run started
    nsec = max(int(t1 - t0), 1)
    lat = [[] for _ in range(nsec)]
    for t, ms in xacts:
        i = int(t - t0)
        if 0 <= i < nsec:
            lat[i].append(ms)
    with open(os.path.join(raw, "proc.csv")) as f:
        proc = list(csv.DictReader(f))

    def wchar_series(col):
        pts = [(float(r["t"]) - t0, int(r[col])) for r in proc if r[col]]
        per = [0.0] * nsec
        for (ta, a), (tb, b) in zip(pts, pts[1:]):
            i = int(tb)
            if 0 <= i < nsec and tb > ta:
                per[i] += (b - a) / PAGE / (tb - ta)
        total = (pts[-1][1] - pts[0][1]) / PAGE if len(pts) > 1 else 0
        return per, total

    worker, worker_total = wchar_series("worker_wchar")
    bgwriter, bgwriter_total = wchar_series("bgwriter_wchar")
    ckptr, ckptr_total = wchar_series("checkpointer_wchar")
    dirty = [None] * nsec
    for r in proc:
        i = int(float(r["t"]) - t0)
        if 0 <= i < nsec and r["dirty_kb"]:
            dirty[i] = int(r["dirty_kb"]) / 1024.0
    in_ckpt = [inside(t0 + i + 0.5) for i in range(nsec)]
    with open(os.path.join(raw, "series.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "tps", "p99_ms", "worker_pages", "bgwriter_pages",
                    "checkpointer_pages", "dirty_mb", "in_checkpoint"])
        for i in range(nsec):
            w.writerow([i, len(lat[i]),
                        "%.3f" % pct(lat[i], 99) if lat[i] else "",
                        "%.0f" % worker[i], "%.0f" % bgwriter[i],
                        "%.0f" % ckptr[i],
                        "%.1f" % dirty[i] if dirty[i] is not None else "",
                        int(in_ckpt[i])])

    tps = None
    with open(os.path.join(raw, "pgbench.out")) as f:
        for line in f:
            m = re.match(r"tps = ([\d.]+)", line)
            if m:
                tps = float(m.group(1))
    # whole seconds only, not the first (connections)
    full = [len(x) for x in lat[1:]]
    in_lat = [ms for t, ms in xacts if inside(t)]
    out_lat = [ms for t, ms in xacts if not inside(t)]
    with open(os.path.join(raw, "backend_writes.txt")) as f:
        backend = int(f.read().strip() or 0)
    done = [c for c in ckpts if c[2] is not None]
    fig = {
        "config": meta["config"], "round": meta["round"],
        "tps": tps, "xacts": len(xacts),
        "p99_ms": pct([ms for _, ms in xacts], 99),
        "p99_in_ckpt_ms": pct(in_lat, 99) if in_lat else None,
        "p99_out_ckpt_ms": pct(out_lat, 99) if out_lat else None,
        "worst_1s_tps": min(full) if full else None,
        "median_1s_tps": statistics.median(full) if full else None,
        "worker_pages": round(worker_total), "bgwriter_pages": round(bgwriter_total),
        "checkpointer_pages": round(ckptr_total), "backend_pages": backend,
        "checkpoints": len(done),
        "ckpt_buffers_mean": (statistics.mean(c[2] for c in done) if done else None),
        "ckpt_sync_s_max": (max(c[3] for c in done) if done else None),
        "ckpt_write_s_mean": (statistics.mean(c[4] for c in done) if done else None),
        "dirty_mb_max": max((d for d in dirty if d is not None), default=None),
    }
    fig["writes_per_xact"] = (fig["worker_pages"] + fig["bgwriter_pages"] +
                              fig["checkpointer_pages"] + backend) / len(xacts)
    stats_path = os.path.join(raw, "bgw_jit_stats.csv")
    if os.path.exists(stats_path):
        with open(stats_path) as f:
            s = next(csv.DictReader(f))
        for k in ("buf_clean", "buf_all_clean", "buf_clean_evicted", "buf_clean_redirtied"):
            fig[k] = int(s[k])
    with open(os.path.join(raw, "figures.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fig))
        w.writeheader()
        w.writerow(fig)
    return fig


def fmt(v, spec="%.2f"):
    return "–" if v is None else spec % v


def cell(values, spec="%.2f"):
    v = [x for x in values if x is not None]
    if not v:
        return "–"
    if len(v) == 1:
        return spec % v[0]
    return "%s [%s–%s]" % (spec % statistics.median(v), spec % min(v), spec % max(v))


def gnuplot(script, cwd):
    subprocess.run(["gnuplot"], input=script, text=True, cwd=cwd, check=True)


def plot_run(raw, png, title):
    """Four panels over time, checkpoint seconds shaded."""
    rows = list(csv.DictReader(open(os.path.join(raw, "series.csv"))))
    spans, start = [], None
    for r in rows:
        if r["in_checkpoint"] == "1" and start is None:
            start = int(r["t"])
        elif r["in_checkpoint"] == "0" and start is not None:
            spans.append((start, int(r["t"])))
            start = None
    if start is not None:
        spans.append((start, int(rows[-1]["t"]) + 1))
    rects = "\n".join(
        "set object %d rect from %d, graph 0 to %d, graph 1 fc rgb '#e0e0e0' fs solid noborder behind"
        % (i + 1, a, b) for i, (a, b) in enumerate(spans))
    series = os.path.join(raw, "series.csv")
    gnuplot("""
set terminal pngcairo size 1000,1100 font ',9' noenhanced
set output '%(png)s'
set datafile separator ','
set lmargin 10
set key autotitle columnhead top left
set multiplot layout 4,1 title '%(title)s (grey: checkpoints)'
%(rects)s
set ylabel 'tps'
plot '%(s)s' using 1:2 with lines lw 1 lc rgb '#1f77b4' title 'transactions per second'
set ylabel 'p99 ms'
set logscale y
plot '%(s)s' using 1:3 with lines lw 1 lc rgb '#d62728' title 'p99 latency of the second'
unset logscale y
set ylabel 'pages/s'
plot '%(s)s' using 1:4 with lines lw 1 title 'bgw_jit worker', \
     '' using 1:5 with lines lw 1 title 'background writer', \
     '' using 1:6 with lines lw 1 title 'checkpointer'
set ylabel 'MB'
set xlabel 'seconds since the run started'
plot '%(s)s' using 1:7 with lines lw 1 lc rgb '#9467bd' title 'Dirty (page cache)'
unset multiplot
""" % {"png": png, "title": title, "rects": rects, "s": series}, os.path.dirname(png))


def plot_overlay(runs, png):
    parts = ["'%s' using 1:2 with lines lw 1 title '%s'"
             % (os.path.join(raw, "series.csv"), cfg) for cfg, raw in runs]
    gnuplot("""
set terminal pngcairo size 1000,500 font ',9' noenhanced
set output '%s'
set datafile separator ','
set key top left
set ylabel 'transactions per second'
set xlabel 'seconds since the run started'
set title 'tps per second, every configuration (round 1; checkpoints at their own times)'
plot %s
""" % (png, ", \\\n     ".join(parts)), os.path.dirname(png))


def summarize(out):
    meta = read_env(os.path.join(out, "meta.env"))
    figs = []
    for raw in sorted(glob.glob(os.path.join(out, "raw", "*_r*"))):
        if os.path.exists(os.path.join(raw, "meta.env")):
            figs.append(run_figures(raw))
    if not figs:
        raise SystemExit("no runs in " + out)
    keys = []
    for f in figs:
        keys += [k for k in f if k not in keys]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for fig in figs:
            w.writerow(fig)
    configs = meta["configs"].split()
    by = {(f["config"], f["round"]): f for f in figs}
    rounds = sorted({f["round"] for f in figs}, key=int)

    def ratio(f, k):
        base = by.get(("nobgw", f["round"]))
        if not base or not base.get(k) or f.get(k) is None:
            return None
        return f[k] / base[k]

    lines = ["# bgw_jit and checkpoints (seed 003), %s" % meta["date"], "",
             "Command: `%s`  " % meta["cmdline"],
             "Machine: %s cores (`nproc`), %s, kernel %s; finished %s  "
             % (meta["nproc"], meta["version"], meta["kernel"], meta.get("finished", "?")),
             "Runs: pgbench TPC-B-like, scale %s in shared_buffers %s (read in by "
             "pg_prewarm), %s clients, %s s per run after %s s of warm-up, "
             "checkpoint_timeout %s s, synchronous commits; %s round(s), "
             "configurations in run order: %s"
             % (meta["scale"], meta["shared_buffers"], meta["clients"],
                meta["duration"], meta["warmup"], meta["checkpoint_timeout"],
                meta["rounds"], ", ".join(configs)), "", "## Configurations", ""]
    for cfg in configs:
        raw = os.path.join(out, "raw", "%s_r1" % cfg)
        info = open(os.path.join(raw, "info.txt")).read().strip() if os.path.exists(os.path.join(raw, "info.txt")) else cfg
        lines.append("- `%s`: %s" % (cfg, info))
    lines += ["", "## Figures", "",
              "Medians over rounds [min–max]. *× nobgw*: over no cleaner's figure "
              "in the same round. *p99 in / out*: the 99th percentile latency of "
              "the transactions that ended inside a checkpoint (between its "
              "\"starting\" and \"complete\" log lines) and outside. *worst 1 s*: "
              "the fewest transactions completed in one whole second, over the "
              "median second of the same run. *writes/xact*: pages written by "
              "the cleaner, the built-in writer and the checkpointer (kernel "
              "wchar / 8192) plus the backends' (pg_stat_statements), per "
              "transaction. *ckpt buffers*: buffers a completed checkpoint wrote "
              "(log_checkpoints), mean per checkpoint; *sync s*: its longest sync "
              "phase.", "",
              "| config | tps × nobgw | p99 ms | p99 × nobgw | p99 in ckpt ms | p99 out ckpt ms | worst 1 s / median 1 s | writes/xact | writes/xact × nobgw | cleaner pages | checkpointer pages | ckpt buffers | sync s (max) | checkpoints |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg in configs:
        fs = [by[(cfg, r)] for r in rounds if (cfg, r) in by]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            cfg,
            cell([ratio(f, "tps") for f in fs], "%.3f"),
            cell([f["p99_ms"] for f in fs]),
            cell([ratio(f, "p99_ms") for f in fs], "%.3f"),
            cell([f["p99_in_ckpt_ms"] for f in fs]),
            cell([f["p99_out_ckpt_ms"] for f in fs]),
            cell([f["worst_1s_tps"] / f["median_1s_tps"] if f["median_1s_tps"] else None for f in fs], "%.3f"),
            cell([f["writes_per_xact"] for f in fs], "%.3f"),
            cell([ratio(f, "writes_per_xact") for f in fs], "%.3f"),
            cell([f["worker_pages"] + f["bgwriter_pages"] for f in fs], "%.0f"),
            cell([f["checkpointer_pages"] for f in fs], "%.0f"),
            cell([f["ckpt_buffers_mean"] for f in fs], "%.0f"),
            cell([f["ckpt_sync_s_max"] for f in fs], "%.3f"),
            cell([f["checkpoints"] for f in fs], "%.0f")))
    jit = [f for f in figs if "buf_all_clean" in f]
    if jit:
        lines += ["", "## bgw_jit's own counts (the extension's figures, for the split of its writes)", "",
                  "*all-scan*: pages the all-buffers scan of `jit+all` wrote; *LRU*: the "
                  "just-in-time scan's; *re-dirtied*: writes of either scan whose page "
                  "was found dirty again before it left its buffer (written twice), "
                  "*evicted*: whose page left clean.", "",
                  "| config | LRU pages | all-scan pages | re-dirtied | evicted |",
                  "|---|---|---|---|---|"]
        for cfg in configs:
            fs = [by[(cfg, r)] for r in rounds if (cfg, r) in by and "buf_all_clean" in by[(cfg, r)]]
            if fs:
                lines.append("| %s | %s | %s | %s | %s |" % (
                    cfg, cell([f["buf_clean"] for f in fs], "%.0f"),
                    cell([f["buf_all_clean"] for f in fs], "%.0f"),
                    cell([f["buf_clean_redirtied"] for f in fs], "%.0f"),
                    cell([f["buf_clean_evicted"] for f in fs], "%.0f")))
    lines += ["", "## Plots", ""]
    runs = []
    for cfg in configs:
        raw = os.path.join(out, "raw", "%s_r1" % cfg)
        if os.path.exists(os.path.join(raw, "series.csv")):
            png = os.path.join(out, "%s.png" % cfg)
            plot_run(raw, png, "%s, round 1" % cfg)
            runs.append((cfg, raw))
            lines.append("- [`%s.png`](%s.png)" % (cfg, cfg))
    if runs:
        plot_overlay(runs, os.path.join(out, "overlay.png"))
        lines.append("- [`overlay.png`](overlay.png): tps per second of every configuration")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    if len(argv) == 3 and argv[1] == "--run":
        f = run_figures(argv[2])
        print("tps %s  p99 %.2f ms (in ckpt %s, out %s)  worst 1 s %s of %s  "
              "writes/xact %.3f  checkpoints %d  cleaner %d  checkpointer %d pages"
              % (fmt(f["tps"], "%.0f"), f["p99_ms"], fmt(f["p99_in_ckpt_ms"]),
                 fmt(f["p99_out_ckpt_ms"]), f["worst_1s_tps"], fmt(f["median_1s_tps"], "%.0f"),
                 f["writes_per_xact"], f["checkpoints"],
                 f["worker_pages"] + f["bgwriter_pages"], f["checkpointer_pages"]))
    elif len(argv) == 2:
        summarize(argv[1])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
