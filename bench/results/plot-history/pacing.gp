set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "pacing.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set title "bgw_jit: margin and planned sleep (466 cycles, 1 s bins)"
set ylabel "margin"
set yrange [0:*]
set y2label 'ms'
set y2tics
set y2range [0:*]
set ytics nomirror
set offsets 0, 0, graph 0.05, 0
plot 'history.csv' skip 1 using 1:14 with lines lw 1.5 title "margin (multiplier in force)", \
     'history.csv' skip 1 using 1:15 axes x1y2 with lines lw 1.5 title "planned sleep, ms (right axis)"
