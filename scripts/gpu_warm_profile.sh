#!/usr/bin/env bash
# Where a warm start's first call goes, per backend: a cold child fills fresh caches, a warm child
# compiles again under cProfile (COIL_BENCH_PROFILE); prints the warm first call and its top
# functions by cumulative time. CASE (default gpt2), BACKENDS (default "coil inductor").
set -uo pipefail
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
CASE=${CASE:-gpt2}
for b in ${BACKENDS:-coil inductor}; do
  root=$(mktemp -d)
  export COIL_CACHE_DIR=$root/coil TORCHINDUCTOR_CACHE_DIR=$root/inductor TRITON_CACHE_DIR=$root/triton
  python3 -m coil.bench --compile-one $CASE --backend $b --device cuda --size cuda 2>/dev/null | grep COIL_BENCH_RESULT | cut -c1-300
  COIL_BENCH_PROFILE=$OUT/warm_$b.prof python3 -m coil.bench --compile-one $CASE --backend $b --device cuda --size cuda 2>/dev/null | grep COIL_BENCH_RESULT | cut -c1-600
  python3 - "$OUT/warm_$b.prof" <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(45)
s.sort_stats("tottime").print_stats(20)
PY
done 2>&1 | grep -v "^$" | cut -c1-200
