set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "writes.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set title "bgw_jit: written and reusable found (466 cycles, 1 s bins)"
set ylabel "buffers / s"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:7 with lines lw 1.5 title "written by the cleaner", \
     'history.csv' skip 1 using 1:8 with lines lw 1.5 title "reusable found (written or already clean)", \
     'history.csv' skip 1 using 1:9 with lines lw 1.5 title "passed by the hand uncleaned (overrun)"
