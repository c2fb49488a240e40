set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "allocations.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set title "bgw_jit: allocations against the estimate (466 cycles, 1 s bins)"
set ylabel "buffers / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:3 with lines lw 1.5 title "allocations (credited to cycles)", \
     'history.csv' skip 1 using 1:4 with lines lw 1.5 title "estimator: smoothed allocations", \
     'history.csv' skip 1 using 1:5 with lines lw 1.5 title "pacer: clock-hand speed"
