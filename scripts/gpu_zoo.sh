#!/usr/bin/env bash
# On the GPU machine (device tool): install coil, then advance the zoo sweep by one slice.
#   coil: the wheel carried in .whl/ when there (carry ".whl"), else built once into $OUT (copy it
#   to .whl/ here for the next calls).
#   results: zoo_results/cuda (carry "zoo_results" so that --resume skips the models done); the
#   folder comes back as $OUT/zoo_cuda.tgz.
# ZOO_ARGS adds options (--shard K/N, --family ...); ZOO_JOBS models side by side (default 6);
# ZOO_MINUTES: no model starts after it, ZOO_STOP: models still running are killed, unrecorded.
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install --no-deps --force-reinstall .whl/*.whl > "$OUT/install.log" 2>&1 \
    || { tail -20 "$OUT/install.log"; exit 1; }
else
  python3 -m pip wheel --no-build-isolation --no-deps -w "$OUT" . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  python3 -m pip install --no-deps "$OUT"/*.whl >> "$OUT/build.log" 2>&1 || exit 1
fi
echo "coil installed"
ZOO_DIR=$(pwd)/zoo_results/cuda
mkdir -p "$ZOO_DIR"
cd /tmp
python3 -m coil.bench.zoo --device cuda --out "$ZOO_DIR" --resume --jobs "${ZOO_JOBS:-6}" \
  --time-limit "${ZOO_MINUTES:-5}" --stop-after "${ZOO_STOP:-8}" --timeout 480 ${ZOO_ARGS:-} \
  > "$OUT/zoo.log" 2>&1
echo "zoo exit $?"
grep '^\[' "$OUT/zoo.log" | tail -60
tar czf "$OUT/zoo_cuda.tgz" -C "$(dirname "$ZOO_DIR")" cuda
