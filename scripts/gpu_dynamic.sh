#!/usr/bin/env bash
# On the GPU machine: build coil, run tests/gpu (dynamic shapes included), the variable-length
# GPT-2 benchmark (eager / Inductor / coil side by side), and static cases to check that the
# static path did not change. Results go under $OUT.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
echo "build ok ($(( $(date +%s) - start )) s)"
timeout ${GPU_TEST_TIMEOUT:-300} python3 -m pytest tests/gpu -q -p no:cacheprovider -x 2>&1 | grep -v DEBUG | tail -15 | tee "$OUT/gpu_tests.log"
echo "tests done ($(( $(date +%s) - start )) s)"
cd /tmp
timeout ${VARLEN_TIMEOUT:-240} python3 -m coil.bench.varlen --device cuda --json "$OUT/varlen.json" 2>&1 | grep -v -i warn | tee "$OUT/varlen.md"
echo "varlen done ($(( $(date +%s) - start )) s)"
if [ -n "${BENCH_CASES:-}" ]; then
  timeout 200 python3 -m coil.bench --device cuda --no-progress --no-plots --compile-time none \
    --cases "$BENCH_CASES" --out "$OUT/bench" > "$OUT/bench.log" 2>&1
  grep -E "^\| [a-z0-9_]+ \| [a-z0-9]" "$OUT"/bench/results.md | head -12
  rm -f "$OUT/bench/results.json"
fi
echo "all done ($(( $(date +%s) - start )) s)"
