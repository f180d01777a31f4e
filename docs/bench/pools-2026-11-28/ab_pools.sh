#!/bin/bash
# the stage at 20,000 and 2,000 lines/s (paced) and 20,000 unpaced, with Spark's block-manager
# pools and bounded ones, interleaved; $1 = revision with the bound, $2 = without, $3 = rounds
cd /work/main
for i in $(seq 1 ${3:-1}); do
  for v in bounded spark; do
    case $v in bounded) R=$1;; spark) R=$2;; esac
    git checkout -q $R
    for c in "--rate 20000" "--rate 2000" "--rate 20000 --min-batch-interval 0"; do
      echo "== $v $i $c [$(git log --oneline -1 | cut -c1-50)]"
      .venv/bin/python -m logcount.bench.rate $c --out /work/exp/ab_pools_out/$v$i 2>/dev/null
    done
  done
done
git checkout -q main
