set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "judgements.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set title "bgw_jit: useful and wasted writes (judged at the next visit) (466 cycles, 1 s bins)"
set ylabel "writes / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:12 with lines lw 1.5 title "evicted: page left its buffer (useful)", \
     'history.csv' skip 1 using 1:13 with lines lw 1.5 title "re-dirtied before eviction (wasted)"
