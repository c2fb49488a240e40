set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "tps_c8.png"
set datafile separator ','
set key outside right
set grid
set title "tps per second (pgbench -P 1), 8 clients, round 1"
set xlabel 'seconds since the first transaction'
set ylabel "tps"
set xrange [*:*]
set yrange [0:*]
plot "series/nobgw_c8_r1_progress.csv" skip 1 using 1:2 with lines lw 1.5 title "nobgw", "series/jit_off_c8_r1_progress.csv" skip 1 using 1:2 with lines lw 1.5 title "jit_off", "series/nobgw_again_c8_r1_progress.csv" skip 1 using 1:2 with lines lw 1.5 title "nobgw_again", "series/bgw_jit_c8_r1_progress.csv" skip 1 using 1:2 with lines lw 1.5 title "bgw_jit"
