set terminal pngcairo size 1000,1800 font ',10' noenhanced
set output "history.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set multiplot layout 5,1
set title "bgw_jit: allocations against the estimate"
set ylabel "buffers / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:3 with lines lw 1.5 title "allocations (credited to cycles)", \
     'history.csv' skip 1 using 1:4 with lines lw 1.5 title "estimator: smoothed allocations", \
     'history.csv' skip 1 using 1:5 with lines lw 1.5 title "pacer: clock-hand speed"
set title "bgw_jit: written and reusable found"
set ylabel "buffers / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:7 with lines lw 1.5 title "written by the cleaner", \
     'history.csv' skip 1 using 1:8 with lines lw 1.5 title "reusable found (written or already clean)", \
     'history.csv' skip 1 using 1:9 with lines lw 1.5 title "passed by the hand uncleaned (overrun)"
set title "bgw_jit: the cleaner's lead over the clock hand"
set ylabel "buffers"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:10 with lines lw 1.5 title "lead at the start of a cycle (bufs_ahead)", \
     'history.csv' skip 1 using 1:11 with lines lw 1.5 title "lead aimed for (lead_target)", \
     'history.csv' skip 1 using 1:17 with lines lw 1.5 title "shared_buffers"
set title "bgw_jit: useful and wasted writes (judged at the next visit)"
set ylabel "writes / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:12 with lines lw 1.5 title "evicted: page left its buffer (useful)", \
     'history.csv' skip 1 using 1:13 with lines lw 1.5 title "re-dirtied before eviction (wasted)"
set title "bgw_jit: margin and planned sleep"
set ylabel "margin"
set yrange [0:*]
set y2label 'ms'
set y2tics
set y2range [0:*]
set ytics nomirror
set offsets 0, 0, graph 0.05, 0
plot 'history.csv' skip 1 using 1:14 with lines lw 1.5 title "margin (multiplier in force)", \
     'history.csv' skip 1 using 1:15 axes x1y2 with lines lw 1.5 title "planned sleep, ms (right axis)"
unset multiplot
