#!/usr/bin/env bash
# On the GPU machine: build coil, run tests/gpu, then the layout benchmarks side by side with
# Inductor: conv nets (channels-last decision) and the unaligned GEMM cases (GEMM padding), and a
# ResNet-50 kernel profile under each layout.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
echo "build ok ($(( $(date +%s) - start )) s)"
timeout 300 python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | grep -v DEBUG | tail -6 | tee "$OUT/gpu_tests.log"
echo "tests done ($(( $(date +%s) - start )) s)"
cd /tmp
timeout 240 python3 -m coil.bench --device cuda --no-progress --no-plots --compile-time none \
  --cases ${BENCH_CASES:-resnet18,resnet50,mobilenet_v3,gpt2_lm,mm_odd} --out "$OUT/bench" > "$OUT/bench.log" 2>&1
grep -E "^\| [a-z0-9_]+ \| [a-z0-9]" "$OUT"/bench/results.md | head -8
echo "bench done ($(( $(date +%s) - start )) s)"
cd - > /dev/null
timeout 120 python3 scripts/gpu_profile.py --model resnet50 --batch 64 --top 8 \
  --backends "coil;coil:channels_last=off" 2>&1 | grep -E "===|ms " | head -20
rm -f "$OUT/bench/results.json"
echo "all done ($(( $(date +%s) - start )) s)"
