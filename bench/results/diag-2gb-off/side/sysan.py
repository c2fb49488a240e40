import gzip, sys, os, glob
res = sys.argv[1]
# the samples: argv[2], else the results directory's side/sys.log.gz
LOG = sys.argv[2] if len(sys.argv) > 2 else os.path.join(res, 'side', 'sys.log.gz')
runs = []
for d in sorted(glob.glob(res + '/raw/*')):
    def t(f):
        for l in open(f):
            if l.startswith('t='): return float(l[2:])
    try:
        xacts = None
        for l in open(d + '/pgbench.out'):
            if l.startswith('number of transactions actually processed'): xacts = int(l.split(':')[1].split('/')[0])
        runs.append((os.path.basename(d), t(d+'/proc0.env'), t(d+'/proc1.env'), xacts))
    except Exception as e: pass
S = []
for l in (gzip.open(LOG, 'rt') if LOG.endswith('.gz') else open(LOG)):
    p = l.rstrip().split('|')
    try: S.append((float(p[1]), [int(x) for x in p[2].split()], [int(x) for x in p[3].split()], p[4]))
    except: pass
for r, a, b, x in runs:
    s = [v for v in S if a <= v[0] <= b]
    if len(s) < 2 or not x: continue
    (t0, c0, v0, _), (t1, c1, v1, _) = s[0], s[-1]
    dt = t1 - t0; fr = dt / (b - a)
    xs = x * fr
    d = [y - z for y, z in zip(c1, c0)]
    tot = sum(d[:8])
    us = lambda j: d[j] * 10000.0 / xs  # jiffies(10ms) -> us per xact
    print('%-16s tps=%5.0f usr %.0f sys %.0f softirq %.0f idle %.0f iowait %.0f us/xact | pgpgout %.1f MB/s dirty_end %d MB' % (
        r, x / 60, us(0) + us(1), us(2), us(6), us(3), us(4), (v1[3] - v0[3]) / 1024 / dt, v1[0] * 4 / 1024))
