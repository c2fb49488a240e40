#!/usr/bin/env python3
"""bench/recovery.py - the measuring half of bench/recovery (stdlib only).

Subcommands (both called by bench/recovery):
  watch DATADIR LOGFILE RAWDIR   start the server on a crash image without
                                 waiting, sample the kernel's counts of its
                                 processes until it accepts connections,
                                 write RAWDIR/samples.csv and figures.env
  report OUTDIR                  results.csv (one row per run) and
                                 summary.md; exit 1 if a run is missing

What is counted: /proc/PID/io wchar of the startup process, of the
cleaner (bgw_jit's worker or core's background writer) and of the
checkpointer, divided by 8192.  wchar counts every byte a process hands
to write()/pwrite(), whatever the page cache does later; write_bytes
counts page-cache pages when first dirtied, so a block written again
before the kernel wrote it back (common here: the crash image's files
are still dirty in the page cache) counts once or not at all.  In crash
recovery none of these processes writes anything else of size but the
end-of-recovery checkpoint's WAL and pg_control (the checkpointer's) and
a few log lines.
"""

import calendar
import csv
import glob
import os
import re
import statistics
import subprocess
import sys
import time

PAGE = 8192
SAMPLE_S = 0.1
TIMEOUT_S = 1800

# process title (after "postgres: [cluster_name: ]") -> role
ROLES = [
    (re.compile(r"^startup\b"), "startup"),
    (re.compile(r"^bgw_jit cleaner\b"), "jit"),
    (re.compile(r"^background writer\b"), "bgwriter"),
    (re.compile(r"^checkpointer\b"), "checkpointer"),
]


def die(msg):
    print("recovery.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def children(pm):
    """The postmaster's children, from the kernel."""
    raw = read_file("/proc/%d/task/%d/children" % (pm, pm))
    if raw is not None:
        return [int(p) for p in raw.split()]
    kids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        raw = read_file(stat)
        if raw is None:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        fields = raw[raw.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pm:
            kids.append(int(stat.split("/")[2]))
    return kids


def role_of(pid):
    raw = read_file("/proc/%d/cmdline" % pid)
    if raw is None:
        return None
    title = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    title = re.sub(r"^postgres: (?:[^:]*: )?", "", title)
    for pattern, role in ROLES:
        if pattern.search(title):
            return role
    return None


def proc_counts(pid):
    """wchar, write_bytes and CPU seconds of a process, or None."""
    io = read_file("/proc/%d/io" % pid)
    stat = read_file("/proc/%d/stat" % pid)
    if io is None or stat is None:
        return None
    fields = dict(
        line.split(b":", 1) for line in io.splitlines() if b":" in line)
    st = stat[stat.rfind(b")") + 2:].split()
    tck = os.sysconf("SC_CLK_TCK")
    try:
        return {
            "wchar": int(fields[b"wchar"]),
            "write_bytes": int(fields[b"write_bytes"]),
            "cpu_s": (int(st[11]) + int(st[12])) / tck,
        }
    except (KeyError, IndexError, ValueError):
        return None


def log_ts(line):
    """Seconds of a log line's %m prefix, for differences between lines
    of one run (all in the server's log_timezone)."""
    m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?", line)
    if not m:
        return None
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + \
        float(m.group(2) or 0)


def watch(datadir, logfile, raw):
    """Start the server on the crash image and watch it recover."""
    offset = os.path.getsize(logfile) if os.path.exists(logfile) else 0
    t0 = time.time()
    subprocess.run(["pg_ctl", "-W", "-D", datadir, "-l", logfile, "start"],
                   check=True, stdout=subprocess.DEVNULL)
    pm = None
    samples = []            # (t, role, pid, wchar, write_bytes, cpu_s)
    last = {}               # role -> counts at its last reading
    at_redo_done = None     # last readings before "redo done" was logged
    redo_seen = ready_seen = False
    while True:
        now = time.time()
        if now - t0 > TIMEOUT_S:
            die("no 'ready to accept connections' within %d s" % TIMEOUT_S)
        if pm is None:
            raw_pid = read_file(os.path.join(datadir, "postmaster.pid"))
            if raw_pid and raw_pid.split(b"\n")[0].strip().isdigit():
                pm = int(raw_pid.split(b"\n")[0])
        if pm is not None:
            for pid in children(pm):
                role = role_of(pid)
                if role is None:
                    continue
                c = proc_counts(pid)
                if c is None:
                    continue
                samples.append((now - t0, role, pid, c["wchar"],
                                c["write_bytes"], c["cpu_s"]))
                last[role] = dict(c, pid=pid)
        # the log is read after the counts: readings taken before a line
        # was logged belong to the phase before it
        log = (read_file(logfile) or b"")[offset:].decode("utf-8", "replace")
        if not redo_seen and "redo done at" in log:
            redo_seen = True
        elif not redo_seen:
            at_redo_done = {r: dict(c) for r, c in last.items()}
        if "database system is ready to accept connections" in log:
            ready_seen = True
            wall_ready = time.time() - t0
            break
        if re.search(r"(FATAL|PANIC):", log) and pm is not None and \
                not os.path.exists("/proc/%d" % pm):
            die("the server did not start:\n" + log[-2000:])
        time.sleep(SAMPLE_S)
    # the end-of-recovery checkpoint is done when connections are accepted
    final = {}
    for pid in children(pm):
        role = role_of(pid)
        c = proc_counts(pid) if role else None
        if c:
            final[role] = c
    final["startup"] = last.get("startup")     # it has exited by now

    lines = log.splitlines()

    def first(pattern):
        for line in lines:
            if re.search(pattern, line):
                return line
        return None

    start_line = first(r"starting PostgreSQL") or (lines[0] if lines else "")
    redo_start = first(r"redo starts at")
    redo_done = first(r"redo done at")
    ready = first(r"ready to accept connections")
    elapsed = None
    if redo_done:
        m = re.search(r"elapsed: ([\d.]+) s", redo_done)
        elapsed = float(m.group(1)) if m else None

    def span(a, b):
        ta, tb = (log_ts(a) if a else None), (log_ts(b) if b else None)
        return (tb - ta) if ta is not None and tb is not None else None

    def pages(snap, role, key="wchar"):
        c = (snap or {}).get(role)
        return int(c[key] // PAGE) if c else 0

    def cpu(snap, role):
        c = (snap or {}).get(role)
        return round(c["cpu_s"], 2) if c else 0

    cleaner = "jit" if "jit" in last else "bgwriter"
    fig = {
        "redo_s": elapsed,
        "redo_log_s": span(redo_start, redo_done),
        "ready_s": span(start_line, ready),
        "wall_ready_s": round(wall_ready, 2),
        "startup_pages_redo": pages(at_redo_done, "startup"),
        "startup_pages": pages(final, "startup"),
        "startup_write_bytes_pages": pages(final, "startup", "write_bytes"),
        "startup_cpu_s": cpu(final, "startup"),
        "cleaner": cleaner,
        "cleaner_pages_redo": pages(at_redo_done, cleaner),
        "cleaner_pages": pages(final, cleaner),
        "cleaner_write_bytes_pages": pages(final, cleaner, "write_bytes"),
        "cleaner_cpu_s": cpu(final, cleaner),
        "bgwriter_pages": pages(final, "bgwriter"),
        "jit_pages": pages(final, "jit"),
        "checkpointer_pages": pages(final, "checkpointer"),
        "samples": len({round(s[0], 3) for s in samples}),
        "ready_seen": int(ready_seen),
    }
    with open(os.path.join(raw, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "role", "pid", "wchar", "write_bytes", "cpu_s"])
        for s in samples:
            w.writerow(["%.3f" % s[0]] + list(s[1:]))
    with open(os.path.join(raw, "figures.env"), "w") as f:
        for k, v in fig.items():
            f.write("%s=%s\n" % (k, "" if v is None else
                                 (("%.3f" % v) if isinstance(v, float) else v)))
    with open(os.path.join(raw, "log_lines.txt"), "w") as f:
        for line in (start_line, redo_start, redo_done, ready):
            f.write((line or "(missing)") + "\n")
    print("  redo %s s (log), ready after %s s; startup wrote %d pages "
          "(%d during redo), %s %d (%d during redo), checkpointer %d" % (
              fig["redo_s"], fig["ready_s"] and round(fig["ready_s"], 2),
              fig["startup_pages"], fig["startup_pages_redo"],
              cleaner, fig["cleaner_pages"], fig["cleaner_pages_redo"],
              fig["checkpointer_pages"]))


def read_env(path):
    env = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if "=" in line:
                    k, v = line.split("=", 1)
                    env[k] = v
    return env


COLUMNS = ["config", "round", "redo_s", "redo_log_s", "ready_s",
           "wall_ready_s", "startup_pages_redo", "startup_pages",
           "startup_write_bytes_pages", "startup_cpu_s", "cleaner",
           "cleaner_pages_redo", "cleaner_pages", "cleaner_write_bytes_pages",
           "cleaner_cpu_s", "checkpointer_pages", "samples", "loadavg_before",
           "loadavg_after", "other_postmasters"]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def med_range(xs, digits):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    f = "%%.%df" % digits
    m = statistics.median(xs)
    return "%s (%s–%s)" % (f % m, f % min(xs), f % max(xs))


def report(out):
    meta = read_env(os.path.join(out, "meta.env"))
    configs = meta.get("configs", "").split()
    rounds = int(meta.get("rounds", "0") or 0)
    rows, missing = [], []
    for r in range(1, rounds + 1):
        for cfg in configs:
            run = os.path.join(out, "raw", "%s_r%d" % (cfg, r))
            fig = read_env(os.path.join(run, "figures.env"))
            if not fig.get("ready_seen") == "1":
                missing.append("%s_r%d" % (cfg, r))
                continue
            row = dict(fig)
            row.update(read_env(os.path.join(run, "meta.env")))
            row["config"], row["round"] = cfg, r
            rows.append(row)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)

    lines = []
    lines.append("# Crash recovery: no cleaner, the built-in writer, bgw_jit")
    lines.append("")
    lines.append("Run: `%s`, %s to %s, PostgreSQL %s, %s CPUs (%s)." % (
        meta.get("cmdline", "?"), meta.get("started", "?"),
        meta.get("finished", "?"), meta.get("pg_version", "?"),
        meta.get("nproc", "?"), meta.get("cpu_model", "?")))
    lines.append("")
    lines.append(
        "One crash image (%s), made once and copied afresh for each run; "
        "each configuration recovers it %d times, the configurations "
        "interleaved round by round.  Figures: median (min–max) over the "
        "rounds." % (meta.get("image", "?"), rounds))
    lines.append("")
    lines.append("| configuration | redo (s) | start to ready (s) | "
                 "startup's writes (pages) | cleaner's writes (pages) | "
                 "of them during redo | checkpointer's (pages) | "
                 "startup CPU (s) | cleaner CPU (s) |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    desc = {}
    for item in meta.get("config_desc", "").split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            desc[k.strip()] = v.strip()
    for cfg in configs:
        rs = [r for r in rows if r["config"] == cfg]
        col = lambda k: [num(r.get(k)) for r in rs]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            desc.get(cfg, cfg), med_range(col("redo_s"), 2),
            med_range(col("ready_s"), 2), med_range(col("startup_pages"), 0),
            med_range(col("cleaner_pages"), 0),
            med_range(col("cleaner_pages_redo"), 0),
            med_range(col("checkpointer_pages"), 0),
            med_range(col("startup_cpu_s"), 2),
            med_range(col("cleaner_cpu_s"), 2)))
    lines.append("")
    lines.append(
        "*redo*: the server log's `redo done at ... elapsed:`; *start to "
        "ready*: from the log's `starting PostgreSQL` to `ready to accept "
        "connections` (the end-of-recovery checkpoint included).  Writes: "
        "the kernel's count of bytes each process passed to write() "
        "(`/proc/PID/io` wchar) / 8192, sampled every %.1f s; the startup "
        "process's at its last reading before it exited, the cleaner's "
        "(bgw_jit's worker, or the background writer) and the "
        "checkpointer's (the end-of-recovery checkpoint) once connections "
        "are accepted; *during redo*: the cleaner's at the last reading "
        "before the log said redo was done." % SAMPLE_S)
    lines.append("")
    lines.append("Settings: %s." % meta.get("settings", "?"))
    lines.append("")
    loads = [r.get("loadavg_before", "") for r in rows]
    others = [num(r.get("other_postmasters")) for r in rows]
    lines.append(
        "Machine load: 1-minute load average before each run %s; other "
        "PostgreSQL servers running meanwhile (postmasters not ours): "
        "%s." % (
            ", ".join(l.split()[0] for l in loads if l) or "?",
            med_range(others, 0)))
    if missing:
        lines.append("")
        lines.append("**Missing runs**: " + ", ".join(missing))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if missing else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "watch" and len(sys.argv) == 5:
        watch(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        sys.exit(report(sys.argv[2]))
    else:
        die("usage: recovery.py watch DATADIR LOGFILE RAWDIR | report OUTDIR")


if __name__ == "__main__":
    main()
