#!/bin/bash
for id in nobgw_c8_r3 jit_off_c8_r3 nobgw_again_c8_r3 bgw_jit_c8_r3; do
  while ! ls /tmp/bgw_jit_bench.*/runs/$id/proc0.env >/dev/null 2>&1; do sleep 0.5; [ -e /tmp/samp2/stop ] && exit; done
  sleep 20
  perf record -a -F 199 -g -o /tmp/samp2/perf_$id.data -- sleep 20 > /tmp/samp2/perf_$id.log 2>&1
done
