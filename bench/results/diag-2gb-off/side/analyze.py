import gzip, sys, os, glob, collections
res = sys.argv[1]
# the samples: argv[2], else the results directory's side/waits.log.gz
LOG = sys.argv[2] if len(sys.argv) > 2 else os.path.join(res, 'side', 'waits.log.gz')
runs = []
for d in sorted(glob.glob(res + '/raw/*')):
    def t(f):
        for l in open(f):
            if l.startswith('t='): return float(l[2:])
    try: runs.append((os.path.basename(d), t(d+'/proc0.env'), t(d+'/proc1.env')))
    except Exception as e: pass
W = collections.defaultdict(lambda: collections.Counter()); N = collections.Counter(); L = collections.defaultdict(list)
for line in (gzip.open(LOG, 'rt') if LOG.endswith('.gz') else open(LOG)):
    p = line.rstrip('\n').split('|')
    if len(p) < 6: continue
    try: ts = float(p[1])
    except: continue
    for r, a, b in runs:
        if a <= ts <= b:
            if p[0] == 'W':
                W[r][(p[2], p[3]+':'+p[4])] += int(p[5])
                if p[2] == 'client backend': pass
            else:
                L[r].append((ts, [int(x) for x in p[3].split(',')] + [int(x) for x in p[4].split(',')]))
for r, a, b in runs:
    ts = sorted(set(k for k in []))
    nsamp = len(L[r])
    print('==', r, 'samples', nsamp)
    if nsamp > 1:
        (t0, v0), (t1, v1) = L[r][0], L[r][-1]
        dt = t1 - t0
        names = ['fpi', 'bytes', 'bufs_full', 'wal_write', 'wal_sync']
        print('  WAL/s:', ' '.join('%s=%.0f' % (n, (y - x) / dt) for n, x, y in zip(names, v0, v1)), ' MB/s=%.1f' % ((v1[1]-v0[1])/dt/1e6))
    tot = collections.Counter()
    for (bt, ev), c in W[r].items():
        tot[bt] += c
    for (bt, ev), c in sorted(W[r].items(), key=lambda x: -x[1]):
        if bt in ('client backend', 'bgw_jit', 'bgw_jit WAL flusher', 'walwriter', 'checkpointer') or c > nsamp * 0.05:
            if c >= max(1, nsamp * 0.02):
                print('  %-22s %-40s %6.2f' % (bt[:22], ev[:40], c / max(nsamp, 1)))
