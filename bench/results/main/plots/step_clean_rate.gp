set terminal pngcairo size 1000,600 font ',10' noenhanced
set output "step_clean_rate.png"
set datafile separator ','
set key outside right
set grid
set title "load step after idling: buffers cleaned per second (0.5 s trailing rate, first round)"
set xlabel 'seconds since the first transaction'
set ylabel "buffers cleaned / s"
set xrange [-1:12]
set yrange [0:*]
plot "series/step_builtin_m3_d10_r1_step.csv" skip 1 using 1:3 with lines lw 1.5 title "builtin_m3_d10", "series/step_bgw_jit_m3_d10_r1_step.csv" skip 1 using 1:3 with lines lw 1.5 title "bgw_jit_m3_d10"
