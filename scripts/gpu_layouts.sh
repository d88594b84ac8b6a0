#!/usr/bin/env bash
# On the GPU machine: build coil, run tests/gpu, benchmark the layout cases (unaligned GEMM, GPT-2
# with its LM head, with and without GEMM padding) and profile a conv net under coil's layouts.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok ($(( $(date +%s) - start )) s)"
timeout 240 python3 -m pytest tests/gpu -q -p no:cacheprovider -x 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
echo "tests done ($(( $(date +%s) - start )) s)"
cd /tmp
timeout 200 python3 -m coil.bench --device cuda --no-progress --no-plots --compile-time none \
  --cases mm_odd,gpt2_lm --out "$OUT/bench" > "$OUT/bench.log" 2>&1
grep -E "^\| (mm_odd|gpt2_lm)" "$OUT"/bench/*.md | head -4
COIL_GEMM_PADDING=off timeout 100 python3 -m coil.bench --device cuda --no-progress --no-plots \
  --compile-time none --cases mm_odd --out "$OUT/bench_nopad" > "$OUT/bench_nopad.log" 2>&1
grep -E "^\| mm_odd" "$OUT"/bench_nopad/*.md | head -2
echo "bench done ($(( $(date +%s) - start )) s)"
cd - > /dev/null
timeout 150 python3 scripts/gpu_profile.py --model resnet50 --batch 64 --top 12 \
  --backends "inductor;coil;coil:channels_last=1" 2>&1 | grep -v Warning | tee "$OUT/profile_resnet50.log" | grep -E "===|ms " | head -45
echo "all done ($(( $(date +%s) - start )) s)"
rm -f "$OUT/bench_nopad/results.json" "$OUT/build.log"  # the device tool brings back 8 files
