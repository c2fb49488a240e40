import sys, re, subprocess, collections
W=sys.argv[2]
out=subprocess.run(['perf','script','-i',sys.argv[1],'-F','time,trace,ip,sym'],capture_output=True,text=True).stdout
events=[]
cur=None
for line in out.split('\n'):
    m=re.match(r'\s*([\d.]+):\s+prev_comm=.* prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)',line)
    if m:
        cur=[float(m.group(1)),m.group(2),m.group(3),m.group(4),[]]
        events.append(cur); continue
    if cur is not None and line.strip():
        parts=line.split(None,1)
        if len(parts)==2: cur[4].append(parts[1])
def cls(stk):
    s=' '.join(stk)
    if 'WaitLatch' in s: return 'sleep (WaitLatch)'
    if 'XLogFlush' in s: return 'XLogFlush'
    if 'sched_yield' in s: return 'sched_yield'
    if 'pwrite' in s or 'mdwrite' in s or 'FileWrite' in s: return 'data write'
    if 'LWLock' in s: return 'LWLock'
    return 'other: '+' < '.join(stk[:14])
off=None; tot=collections.Counter(); n=collections.Counter(); mx=collections.Counter()
t_first=events[0][0]; t_last=events[-1][0]
for t,prev,st,nxt,stk in events:
    if prev==W: off=(t,st,cls(stk))
    elif nxt==W and off:
        d=t-off[0]; k=(off[2], 'runnable' if off[1].startswith('R') else 'blocked')
        tot[k]+=d; n[k]+=1; mx[k]=max(mx[k],d); off=None
span=t_last-t_first
print('span %.1f s'%span)
for k,v in tot.most_common():
    print('%-60s %8.1f ms/s  n=%6d (%.1f/s) max %.1f ms'%(k, v/span*1000, n[k], n[k]/span, mx[k]*1000))
