#!/usr/bin/env python3
# Per-transaction CPU of each process class from the perf profiles taken
# 20-40 s into round 3's runs (perf record -a -F 199 -g, 20 s; reports in
# perf_<run>.pid.txt and perf_<run>.pidsym.txt).  Both cores were busy
# throughout (no idle time in sys.log), so a process's share of the
# samples divided by the run's tps is its CPU per transaction, in
# arbitrary units (share % / tps x 10^4).  The eight busiest postgres
# pids are the client backends.  Usage: perf_backends.py [results dir]
import csv, os, sys

res = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
side = os.path.join(res, 'side')
tps = {r['run_id']: float(r['tps']) for r in csv.DictReader(open(os.path.join(res, 'results.csv')))}
runs = [r for r in ('nobgw_c8_r3', 'jit_off_c8_r3', 'bgw_jit_c8_r3')
        if os.path.exists(os.path.join(side, 'perf_%s.pid.txt' % r))]
cost = {}
for r in runs:
    rows = [l.split() for l in open(os.path.join(side, 'perf_%s.pid.txt' % r))]
    rows = [(float(p[0].rstrip('%')), p[1].split(':', 1)) for p in rows]
    pg = [x for x in rows if x[1][1] == 'postgres']
    backends = {x[1][0] for x in pg[:8]}
    cls = {'backends': sum(x[0] for x in pg[:8]),
           'pgbench': sum(x[0] for x in rows if x[1][1] == 'pgbench'),
           'other postgres': sum(x[0] for x in pg[8:])}
    cls['not postgres'] = 100 - sum(cls.values())
    sym = {}
    for l in open(os.path.join(side, 'perf_%s.pidsym.txt' % r)):
        p = l.split()
        if p[1].split(':')[0] in backends:
            sym[p[-1]] = sym.get(p[-1], 0) + float(p[0].rstrip('%'))
    cost[r] = ({k: v / tps[r] * 1e4 for k, v in cls.items()},
               {k: v / tps[r] * 1e4 for k, v in sym.items()}, pg[8:12])
print('| run | tps | ' + ' | '.join(cost[runs[0]][0]) + ' | busiest other postgres pids (share %) |')
print('|---' * (len(cost[runs[0]][0]) + 3) + '|')
for r in runs:
    print('| %s | %.0f | ' % (r, tps[r]) + ' | '.join('%.2f' % v for v in cost[r][0].values()) +
          ' | ' + ', '.join('%s %.1f' % (x[1][0], x[0]) for x in cost[r][2]) + ' |')
print()
print("Backends' symbols, per transaction, largest change of bgw_jit against the mean of the other two:")
print()
print('| symbol | ' + ' | '.join(runs) + ' | change |')
print('|---' * (len(runs) + 2) + '|')
syms = set().union(*(cost[r][1] for r in runs))
def ch(s):
    v = [cost[r][1].get(s, 0) for r in runs]
    return v, v[-1] - sum(v[:-1]) / (len(v) - 1)
for s in sorted(syms, key=lambda s: -abs(ch(s)[1]))[:16]:
    v, c = ch(s)
    print('| %s | ' % s + ' | '.join('%.2f' % x for x in v) + ' | %+.2f |' % c)
print('| (all backend samples) | ' + ' | '.join('%.2f' % sum(cost[r][1].values()) for r in runs) + ' | |')
