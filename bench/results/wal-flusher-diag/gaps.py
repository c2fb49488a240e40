import csv, sys
rows=list(csv.DictReader(open(sys.argv[1])))
print('cycles', len(rows), 'cols', list(rows[0].keys()))
tot_over=sum(int(r['overrun']) for r in rows)
print('overrun total', tot_over, 'lapped', sum(r['lapped']=='t' for r in rows))
ev=[]
for i,r in enumerate(rows):
    if int(r['overrun'])>0:
        ev.append((int(r['overrun']), r['cycle'], int(r['elapsed_us'])/1000, r['sleep_ms'], rows[i-1]['sleep_ms'] if i else None, r['woken'], r['restarted'], r['strategy_delta'], r['bufs_ahead'], rows[i-1]['lead_target'] if i else None, rows[i-1]['cpu_us'] if i else None, r['margin'], r['hand_rate']))
ev.sort(reverse=True)
print('overrun cycle elapsed_ms sleep prev_sleep woken restarted delta ahead prev_lead_target prev_cpu margin hand_rate')
for e in ev[:25]: print(e)
print('n overrun cycles', len(ev))
# distribution of elapsed vs previous planned sleep
late=[]
for i in range(1,len(rows)):
    el=int(rows[i]['elapsed_us'])/1000; pl=int(rows[i-1]['sleep_ms'])
    late.append(el-pl-int(rows[i-1]['cpu_us'])/1000)
late.sort()
n=len(late)
print('lateness ms p50 p90 p99 p999 max', [round(late[int(n*q)],1) for q in (0.5,0.9,0.99,0.999)], round(late[-1],1))
