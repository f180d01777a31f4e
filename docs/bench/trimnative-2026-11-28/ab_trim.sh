#!/bin/bash
# the paced stage at 20,000 and 2,000 lines/s with and without the native heap trim, interleaved
cd /work/main
for i in 1 2; do
  for v in trim none; do
    case $v in trim) O="";; none) O="-XX:TrimNativeHeapInterval=0";; esac
    for r in 20000 2000; do
      echo "== $v $i --rate $r [$O]"
      LOGCOUNT_SPARK_JAVA_OPTIONS="$O" .venv/bin/python -m logcount.bench.rate --rate $r 2>/dev/null
    done
  done
done
