import sys, re, subprocess, collections
W=sys.argv[2]
out=subprocess.run(['perf','script','-i',sys.argv[1],'-F','time,trace,ip,sym'],capture_output=True,text=True).stdout
events=[]; cur=None
for line in out.split('\n'):
    m=re.match(r'\s*([\d.]+):\s+prev_comm=.* prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)',line)
    if m:
        cur=[float(m.group(1)),m.group(2),m.group(3),m.group(4),[]]; events.append(cur); continue
    if cur is not None and line.strip():
        parts=line.split(None,1)
        if len(parts)==2: cur[4].append(parts[1])
def cls(stk):
    s=' '.join(stk)
    if 'WaitLatch' in s: return 'sleep'
    if 'XLogFlush' in s: return 'xlogflush'
    if 'sched_yield' in s: return 'yield'
    return 'preempt'
cycles=[]; start=None; acc=None; off=None; last_in=None
for t,prev,st,nxt,stk in events:
    if prev==W:
        c=cls(stk)
        if start is not None: acc['cpu']+=t-last_in
        if c=='sleep':
            if start is not None: acc['wall']=t-start; cycles.append(acc)
            start=None
        off=(t,c)
    elif nxt==W and off:
        d=t-off[0]
        if off[1]=='sleep':
            start=t; acc=collections.Counter()
        elif start is not None:
            acc[off[1]]+=d
        last_in=t; off=None
cycles.sort(key=lambda a:-a['wall'])
print('cycles',len(cycles))
walls=sorted(a['wall'] for a in cycles); n=len(walls)
print('wall ms p50 p90 p99 max', [round(walls[int(n*q)]*1000,2) for q in (.5,.9,.99)], round(walls[-1]*1000,1))
tot=collections.Counter()
for a in cycles: tot.update(a)
print('totals s', {k:round(v,2) for k,v in tot.items()})
for a in cycles[:15]:
    print({k:round(v*1000,1) for k,v in a.items()})
