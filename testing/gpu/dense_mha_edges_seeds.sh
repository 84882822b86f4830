#!/bin/bash
# The 80-key edge case over many fresh seeds (issue 19's correctness): carried
# as .device/<name>/call.sh beside R/dense_mha_kernels_test.gz (bazel build
# --config=cuda --dynamic_mode=off -c opt, stripped). `glm_80key_edges` 60
# times and the whole suite 4 times, each failure with its message and seed,
# and the spread of the case's worst |error| / tolerance.
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
w=/tmp/dense_seeds; rm -rf $w; mkdir -p $w
gzip -dc $D/R/dense_mha_kernels_test.gz > $w/kt; chmod +x $w/kt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec > >(tee "$out/run.txt") 2>&1
echo "== glm_80key_edges x 60"
timeout 150 $w/kt --gtest_filter='*glm_80key_edges' --gtest_repeat=60 > $w/edges.txt 2>&1; echo "exit $?"
grep -B3 -A6 "Failure" $w/edges.txt | head -40
grep -c "PASSED" $w/edges.txt; grep -c "FAILED  \]" $w/edges.txt
grep -o "worst |error| / tolerance = [0-9.e-]*" $w/edges.txt | awk '{print $NF}' | sort -g | awk '{a[NR]=$1} END {print "n", NR, "min", a[1], "median", a[int((NR+1)/2)], "max", a[NR]}'
gzip -c $w/edges.txt > $out/edges.txt.gz
echo "== whole suite x 4"
timeout 150 $w/kt --gtest_brief=1 --gtest_repeat=4 > $w/all.txt 2>&1; echo "exit $?"
grep -B3 -A6 "Failure" $w/all.txt | head -40; grep -E "PASSED|FAILED  \]" $w/all.txt | sort | uniq -c
grep -o "^[a-z0-9_]* ([^)]*): worst |error| / vmax = [0-9.e-]*, worst |error| / tolerance = [0-9.e-]*" $w/all.txt | awk '{print $1, $NF}' | sort -k1,1 -k2g | awk '{if ($1!=p) {if (p) print p, n, mx; p=$1; n=0; mx=0} n++; if ($2>mx) mx=$2} END {print p, n, mx}'
