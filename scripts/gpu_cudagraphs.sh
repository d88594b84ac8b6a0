#!/usr/bin/env bash
# On the GPU machine: build coil, run the CUDA-graph tests (tests/gpu/test_cudagraphs_gpu.py), then
# GPT-2 small at batch 1x32 (bf16 inference, case gpt2_b1) under the default mode and under
# mode="reduce-overhead", eager / Inductor / coil side by side. Results go under $OUT.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok ($(( $(date +%s) - start )) s)"
timeout "${GPU_TEST_TIMEOUT:-240}" python3 -m pytest tests/gpu/test_cudagraphs_gpu.py -q -p no:cacheprovider -rA 2>&1 \
  | grep -v DEBUG > "$OUT/cudagraph_tests.log"
grep -E "passed|failed|PASSED|FAILED|Error" "$OUT/cudagraph_tests.log" | tail -25
echo "tests done ($(( $(date +%s) - start )) s)"
cd /tmp
for mode in ${BENCH_MODES:-default reduce-overhead}; do
  timeout "${BENCH_TIMEOUT:-200}" python3 -m coil.bench --device cuda --no-progress --no-plots \
    --compile-time none --keep-caches --cases gpt2_b1 --mode "$mode" --out "$OUT/bench_$mode" \
    > "$OUT/bench_$mode.log" 2>&1
  rm -f "$OUT/bench_$mode/results.json"
  grep -E "^\| gpt2_b1" "$OUT/bench_$mode/results.md"
  echo "bench $mode done ($(( $(date +%s) - start )) s)"
done
