#!/bin/bash
while [ ! -e /tmp/samp2/stop ]; do
  echo "S|$(date +%s.%N | cut -c1-14)|$(head -1 /proc/stat | cut -c6-)|$(grep -E '^(nr_dirty|nr_writeback|pgpgout|pgpgin|pgmajfault) ' /proc/vmstat | awk '{printf "%s ", $2}')|$(awk '{print $1, $2}' /proc/pressure/cpu 2>/dev/null | head -1)"
  sleep 1
done >> /tmp/samp2/sys.log
