set terminal pngcairo size 1000,600 font ',10' noenhanced
set output 'cleaner_pct_vs_multiplier.png'
set key outside right
set grid
set title 'bgw_jit cleaner_pct vs lru_multiplier (smoothing 16, maxpages 1000; medians)'
set xlabel 'bgw_jit.lru_multiplier'
set ylabel 'cleaner_pct'
set xrange [0.5:3.5]
set offsets 0, 0, graph 0.1, graph 0.1
plot "plots/cleaner_pct_vs_multiplier.dat" index 0 using 1:2 with linespoints lw 1.5 dt 1 title "10 ms, 4 clients", "plots/cleaner_pct_vs_multiplier.dat" index 1 using 1:2 with linespoints lw 1.5 dt 2 title "200 ms, 4 clients"
