# per auto_explain'd UPDATE with >= 500 pages read: the FSM lookups the
# uprobes counted in the same 1 s interval (perf stat -I 1000)
import re, sys
from datetime import datetime, timezone
d = sys.argv[1]
t0 = float(open(d + "/probes.start").read())
probe = {}
for line in open(d + "/probes.csv"):
    f = line.strip().split(",")
    if len(f) < 4 or line.startswith("#"):
        continue
    try:
        ts, cnt, ev = float(f[0]), int(f[1]), f[3]
    except ValueError:
        continue
    probe.setdefault(round(t0 + ts, 3), {})[ev.split(":")[-1]] = cnt
log = open(d + "/server.log", errors="replace").read()
rx = re.compile(r"^(\S+ \S+) UTC \[\d+\] LOG:  duration: ([\d.]+) ms  plan:\n(?:\t.*\n)*?\t  Buffers: shared ([^\n]*)", re.M)
tot = {}
for sec, evs in probe.items():
    for k, v in evs.items():
        tot[k] = tot.get(k, 0) + v
print("probe totals over the whole run:", tot)
print("statement end (UTC) | ms | buffers | RecordAndGetPageWithFreeSpace calls in the 1 s interval holding its end (and the next)")
for m in rx.finditer(log):
    c = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(3)))
    if c.get("read", 0) < 500:
        continue
    t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
    # perf's interval ending at e covers (e - 1, e]
    ends = sorted(e for e in probe if e - 1 < t <= e + 1)
    a = probe[ends[0]].get("RecordAndGetPageWithFreeSpace", 0) if ends else -1
    b = probe[ends[1]].get("RecordAndGetPageWithFreeSpace", 0) if len(ends) > 1 else -1
    print("%s | %s | %s | %d (%d)" % (m.group(1), m.group(2), m.group(3), a, b))
