set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "lead.png"
set datafile separator ','
set datafile missing 'NaN'
set key outside right
set grid
set xdata time
set timefmt '%s'
set format x '%H:%M:%S'
set xtics 5
set xlabel 'time (UTC)'
set title "bgw_jit: the cleaner's lead over the clock hand (466 cycles, 1 s bins)"
set ylabel "buffers"
set yrange [0:*]
unset y2label
unset y2tics
set ytics mirror
set offsets 0, 0, 0, 0
plot 'history.csv' skip 1 using 1:10 with lines lw 1.5 title "lead at the start of a cycle (bufs_ahead)", \
     'history.csv' skip 1 using 1:11 with lines lw 1.5 title "lead aimed for (lead_target)", \
     'history.csv' skip 1 using 1:17 with lines lw 1.5 title "shared_buffers"
