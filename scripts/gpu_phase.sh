#!/usr/bin/env bash
# One device call of a GPU session (device tool; results under $OUT):
#   bash scripts/gpu_phase.sh build-test [CASES ["PROFILE ARGS"]]
#                                          build a wheel into $OUT, install it, run tests/gpu, then
#                                          bench CASES and run gpu_profile.py with PROFILE ARGS
#                                          (and gpu_overhead.py with $OVERHEAD_ARGS when set)
#   bash scripts/gpu_phase.sh bench CASES  install the wheel carried in .gpu_wheel/, run
#                                          `python -m coil.bench --device cuda --cases CASES`
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
R=$PWD
phase=${1:-build-test}
nvidia-smi --query-gpu=name,clocks.sm,memory.used --format=csv,noheader
if [ "$phase" = build-test ]; then
  start=$(date +%s)
  python3 -m pip wheel --no-build-isolation --no-deps . -w "$OUT" > "$OUT/wheel.log" 2>&1 ||
    { tail -30 "$OUT/wheel.log"; exit 1; }
  echo "wheel built in $(( $(date +%s) - start )) s"
  python3 -m pip install --no-deps -q "$OUT"/coil-*.whl || exit 1
  cd /tmp
  timeout "${GPU_TEST_TIMEOUT:-300}" python3 -m pytest "$R/tests/gpu" -q -p no:cacheprovider \
    --durations=5 > "$OUT/gpu_tests.log" 2>&1
  tail -12 "$OUT/gpu_tests.log"
  if [ -n "${2:-}" ]; then
    timeout "${BENCH_TIMEOUT:-240}" python3 -m coil.bench --device cuda --no-progress --no-plots \
      --compile-time none --cases "$2" --out "$OUT/bench" > "$OUT/bench.log" 2>&1
    tail -3 "$OUT/bench.log"
    grep -E "^\| [a-z]" "$OUT/bench/results.md" | head -40
  fi
  if [ -n "${OVERHEAD_ARGS:-}" ]; then  # host time per call (gpu_overhead.py), coil's debug folder
    COIL_DEBUG_DIR="$OUT/debug" timeout "${OVERHEAD_TIMEOUT:-150}" python3 \
      "$R/scripts/gpu_overhead.py" $OVERHEAD_ARGS > "$OUT/overhead.txt" 2>&1
    grep -E "^===|launch paths|ncalls|function calls" "$OUT/overhead.txt" | head -20
  fi
  if [ -n "${3:-}" ]; then
    timeout "${PROFILE_TIMEOUT:-120}" python3 "$R/scripts/gpu_profile.py" $3 --top 40 \
      > "$OUT/profile.txt" 2>&1
    grep -v Warning "$OUT/profile.txt" | tail -70
  fi
else
  python3 -m pip install --no-deps -q "$R"/.gpu_wheel/coil-*.whl || exit 1
  cd /tmp
  timeout "${BENCH_TIMEOUT:-520}" python3 -m coil.bench --device cuda --no-progress --no-plots \
    --compile-time none --cases "$2" --out "$OUT/bench" > "$OUT/bench.log" 2>&1
  tail -5 "$OUT/bench.log"
  grep -E "^\| [a-z]" "$OUT/bench/results.md" | head -40
fi
