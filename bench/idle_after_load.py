#!/usr/bin/env python3
"""bench/idle_after_load.py OUT - summary.md of a bench/idle-after-load run.

Reads OUT/meta.env, history.csv (bgw_jit_history, every column),
proc.csv (the worker's /proc once a second), shmem.csv, settings.csv,
pgbench.out.  Splits the cycles at the end of the load (cycles that
started before pgbench ended are "under load") and reports per phase:
cycles, pages written, the largest cycle in pages, CPU (cpu_us) and wall
time, the sliced cycles, and the peak 1-second write rate from the
kernel's wchar / 8192.

Wall time of a cycle is not in the history: it is bounded from above by
the start of the next cycle minus the sleep this cycle planned
(next.at - at - sleep_ms), counted only where the next cycle was not
woken early and that gap is under 1 s (a hibernating worker sleeps
longer than it planned); it includes any lateness of the wake-up.
"""
import csv
import os
import sys

SLICE_US = 5000


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


def num(v):
    if v in ("", None):
        return None
    if v in ("t", "f"):
        return v == "t"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def main(out):
    meta = read_env(os.path.join(out, "meta.env"))
    t0, t1, t2 = (float(meta[k]) for k in ("t_load0", "t_load1", "t_idle1"))
    with open(os.path.join(out, "history.csv")) as f:
        hist = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]
    with open(os.path.join(out, "proc.csv")) as f:
        proc = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]
    with open(os.path.join(out, "shmem.csv")) as f:
        shmem = list(csv.DictReader(f))
    with open(os.path.join(out, "settings.csv")) as f:
        settings = {r["name"]: r["setting"] for r in csv.DictReader(f)}
    nbuffers = int(meta["nbuffers"])

    # wall-time bound per cycle
    for i, h in enumerate(hist):
        h["wall_us"] = None
        if i + 1 < len(hist):
            n = hist[i + 1]
            gap = (n["at_epoch"] - h["at_epoch"]) * 1e6
            if not n["woken"] and gap < 1e6 and h["sleep_ms"] is not None:
                h["wall_us"] = max(0.0, gap - 1000 * h["sleep_ms"])

    before = [h for h in hist if h["at_epoch"] < t0]
    load = [h for h in hist if t0 <= h["at_epoch"] < t1]
    after = [h for h in hist if h["at_epoch"] >= t1]

    # 1-second write rates from the sampler
    rates = []
    for a, b in zip(proc, proc[1:]):
        # (a sample the sampler read while /proc changed may lack a field)
        if any(x[k] is None for x in (a, b)
               for k in ("wchar", "run_ns", "vcsw", "nvcsw")):
            continue
        dt = b["t"] - a["t"]
        rates.append({
            "t0": a["t"], "t1": b["t"],
            "pages_s": (b["wchar"] - a["wchar"]) / 8192 / dt,
            "cpu_pct": (b["run_ns"] - a["run_ns"]) / 1e9 / dt * 100,
            "wakeups_s": ((b["vcsw"] + b["nvcsw"]) - (a["vcsw"] + a["nvcsw"])) / dt,
        })
    # a second belongs to the load if it ends by the load's end (+0.5 s)
    r_load = [r for r in rates if r["t0"] >= t0 - 0.5 and r["t1"] <= t1 + 0.5]
    r_after = [r for r in rates if r["t0"] >= t1 - 0.5 and r["t1"] <= t2 + 0.5
               and r not in r_load]
    # (the second that straddles the end of the load counts after it)

    def phase(cyc, rts):
        d = {"cycles": len(cyc)}
        d["written"] = sum(h["written"] or 0 for h in cyc)
        d["scanned"] = sum(h["scanned"] or 0 for h in cyc)
        d["cpu_us"] = sum(h["cpu_us"] or 0 for h in cyc)
        d["sliced"] = sum(1 for h in cyc if h["sliced"])
        d["hit_budget"] = sum(1 for h in cyc if h["hit_maxpages"])
        d["over_slice_cpu"] = sum(1 for h in cyc if (h["cpu_us"] or 0) > SLICE_US)
        d["max_written"] = max(cyc, key=lambda h: h["written"] or 0) if cyc else None
        d["max_cpu"] = max(cyc, key=lambda h: h["cpu_us"] or 0) if cyc else None
        walls = [h for h in cyc if h["wall_us"] is not None]
        d["max_wall"] = max(walls, key=lambda h: h["wall_us"]) if walls else None
        d["over_slice_wall"] = sum(1 for h in walls if h["wall_us"] > SLICE_US)
        d["peak_rate"] = max(rts, key=lambda r: r["pages_s"]) if rts else None
        d["mean_rate"] = (sum(r["pages_s"] for r in rts) / len(rts)) if rts else None
        d["seconds"] = len(rts)
        d["wakeups_s"] = (sum(r["wakeups_s"] for r in rts) / len(rts)) if rts else None
        return d

    P = {"under load": phase(load, r_load), "after the load": phase(after, r_after)}

    def cyc_desc(h):
        if h is None:
            return "–"
        return ("cycle %d: %d written, %d scanned, cpu %d µs, wall ≤ %s µs, sleep %s ms%s" %
                (h["cycle"], h["written"] or 0, h["scanned"] or 0, h["cpu_us"] or 0,
                 "%.0f" % h["wall_us"] if h["wall_us"] is not None else "?",
                 h["sleep_ms"], ", sliced" if h["sliced"] else ""))

    L, A = P["under load"], P["after the load"]
    lines = []
    w = lines.append
    w("# bgw_jit after a load: %s pool (%d buffers), scale %s, %s clients\n" %
      (meta["shared_buffers"], nbuffers, meta["scale"], meta["clients"]))
    w("Command: `%s`  " % meta["cmdline"])
    w("Date: %s  " % meta["date"])
    w("Load: pgbench update-only, %s clients, %s s (warm-up before the reset: %s s); then %s s with no load and no query.  " %
      (meta["clients"], meta["load_s"], meta["warmup_s"], meta["idle_s"]))
    w("Settings: " + " ".join("%s=%s" % (k.replace("bgw_jit.", ""), v)
                              for k, v in sorted(settings.items())) + "\n")
    pool = os.path.join(out, "pool.txt")
    if os.path.exists(pool):
        w("Pool: %s (pg_prewarm of pgbench_accounts and its index after the CHECKPOINT: %s).\n" % (
            "; ".join(l.strip() for l in open(pool)), "yes" if meta.get("prewarm") == "1" else "no"))
    tps = [l for l in open(os.path.join(out, "pgbench.out")) if l.startswith("tps =")]
    if tps:
        w("pgbench: %s\n" % tps[0].strip())
    w("| phase | cycles | pages written (history) | peak 1-s write rate (wchar/8192) | mean pages/s | wake-ups/s | largest cycle, pages | largest cycle, CPU µs | largest cycle, wall µs (bound) | sliced cycles | cycles > 5 ms CPU | cycles > 5 ms wall (bound) | budget-stopped |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, d in P.items():
        w("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d |" % (
            name, d["cycles"], d["written"],
            "%.0f" % d["peak_rate"]["pages_s"] if d["peak_rate"] else "–",
            "%.0f" % d["mean_rate"] if d["mean_rate"] is not None else "–",
            "%.1f" % d["wakeups_s"] if d["wakeups_s"] is not None else "–",
            d["max_written"]["written"] if d["max_written"] else "–",
            d["max_cpu"]["cpu_us"] if d["max_cpu"] else "–",
            "%.0f" % d["max_wall"]["wall_us"] if d["max_wall"] else "–",
            d["sliced"], d["over_slice_cpu"], d["over_slice_wall"], d["hit_budget"]))
    w("")
    for name, d in P.items():
        w("- %s, largest by pages: %s" % (name, cyc_desc(d["max_written"])))
        w("- %s, largest by CPU: %s" % (name, cyc_desc(d["max_cpu"])))
        w("- %s, largest by wall: %s" % (name, cyc_desc(d["max_wall"])))
    w("")
    ok_pages = A["max_written"] is None or L["max_written"] is None or \
        A["max_written"]["written"] <= L["max_written"]["written"]
    ok_cpu = A["over_slice_cpu"] == 0
    ok_rate = A["peak_rate"] is None or L["peak_rate"] is None or \
        A["peak_rate"]["pages_s"] <= L["peak_rate"]["pages_s"]
    w("The bar: after the load no cycle writes more pages than the largest under load: **%s**; "
      "none runs longer than the 5 ms slice (cpu_us): **%s**; the peak 1-second write rate is no higher "
      "than under load: **%s**.\n" % ("met" if ok_pages else "missed", "met" if ok_cpu else "missed",
                                      "met" if ok_rate else "missed"))
    # header scan cost: cycles that scanned without writing
    nowrite = [h for h in hist if (h["written"] or 0) == 0 and (h["scanned"] or 0) >= 1000
               and h["cpu_us"]]
    if nowrite:
        tot_s = sum(h["scanned"] for h in nowrite)
        tot_c = sum(h["cpu_us"] for h in nowrite)
        per = sorted(h["cpu_us"] * 1000.0 / h["scanned"] for h in nowrite)
        w("Header scan cost, from the %d cycles that scanned ≥ 1000 buffers and wrote none: "
          "%.1f ns of CPU per buffer examined overall (%d buffers in %d µs); per cycle median %.1f ns "
          "[%.1f–%.1f]; the largest such cycle scanned %d buffers in %d µs.\n" % (
              len(nowrite), tot_c * 1000.0 / tot_s, tot_s, tot_c, per[len(per) // 2], per[0], per[-1],
              max(h["scanned"] for h in nowrite),
              max(nowrite, key=lambda h: h["scanned"])["cpu_us"]))
    wr = [h for h in hist if (h["written"] or 0) > 0 and h["cpu_us"]]
    if wr:
        w("CPU per written page over all cycles that wrote: %.2f µs (%d pages, %d µs, including their header scans).\n" % (
            sum(h["cpu_us"] for h in wr) / sum(h["written"] for h in wr),
            sum(h["written"] for h in wr), sum(h["cpu_us"] for h in wr)))
    if hist:
        h = hist[0]
        w("First cycle after the reset (it clears the marks array, %d × 4 B, before its scan and outside "
          "the slice): cycle %d, cpu %d µs, scanned %d, written %d.\n" % (
              nbuffers, h["cycle"], h["cpu_us"] or 0, h["scanned"] or 0, h["written"] or 0))
    w("Shared memory (pg_shmem_allocations):\n")
    w("| name | size | allocated |")
    w("|---|---|---|")
    for r in shmem:
        w("| %s | %s | %s |" % (r["name"], r["size"], r["allocated_size"]))
    w("")
    anon = [r["rss_anon_kb"] for r in proc if r["rss_anon_kb"] is not None]
    if anon:
        w("Worker RssAnon: %d kB at the start, %d kB at most, %d kB at the end.\n" % (anon[0], max(anon), anon[-1]))
    w("Per-second series (from the end of the load: t = 0; pages/s = wchar/8192):\n")
    w("| t (s) | pages/s | CPU % | wake-ups/s |")
    w("|---|---|---|---|")
    for r in rates:
        if r["t1"] < t0 - 0.5:
            continue
        w("| %.1f | %.0f | %.1f | %.0f |" % (r["t1"] - t1, r["pages_s"], r["cpu_pct"], r["wakeups_s"]))
    w("")
    w("Files: history.csv (bgw_jit_history, every cycle of the window), proc.csv (the worker's /proc each second), "
      "shmem.csv, settings.csv, stats.csv, pgbench.out.")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:20]))


if __name__ == "__main__":
    main(sys.argv[1])
