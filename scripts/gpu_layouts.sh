#!/usr/bin/env bash
# On the GPU machine: build coil, run tests/gpu, benchmark the layout cases (unaligned GEMM, GPT-2
# with its LM head, with and without GEMM padding) and dump a conv net's channels-last wrapper.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
echo "build ok ($(( $(date +%s) - start )) s)"
timeout 300 python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | grep -v DEBUG | tail -12 | tee "$OUT/gpu_tests.log"
echo "tests done ($(( $(date +%s) - start )) s)"
cd /tmp
timeout 240 python3 -m coil.bench --device cuda --no-progress --no-plots --compile-time none \
  --cases mm_odd,gpt2_lm,gpt2 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
grep -E "^\| (mm_odd|gpt2_lm|gpt2) " "$OUT"/bench/results.md | head -3
COIL_GEMM_PADDING=off timeout 120 python3 -m coil.bench --device cuda --no-progress --no-plots \
  --compile-time none --cases mm_odd,gpt2_lm --out "$OUT/bench_nopad" > /dev/null 2>&1
grep -E "^\| (mm_odd|gpt2_lm) " "$OUT"/bench_nopad/results.md | head -2
echo "bench done ($(( $(date +%s) - start )) s)"
cd - > /dev/null
COIL_DEBUG_DIR=/tmp/cl_dbg timeout 100 python3 scripts/gpu_profile.py --model resnet50 --batch 64 \
  --top 6 --backends "coil:channels_last=1" 2>&1 | grep -E "===|ms " | head -10
cp "$(ls -d /tmp/cl_dbg/*/ | head -1)output_code.py" "$OUT/resnet50_cl_output_code.py" 2>/dev/null
rm -f "$OUT/bench/results.json" "$OUT/bench_nopad/results.json"
echo "all done ($(( $(date +%s) - start )) s)"
