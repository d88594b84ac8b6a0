#!/usr/bin/env bash
# On the GPU machine (device tool): build coil, check it on a small graph, run tests/gpu and the
# quick CUDA benchmark. Results go under $OUT (or ./gpu_out).
set -uo pipefail
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok"
cd /tmp
python3 -X faulthandler - <<'PY' 2>&1 | tee "$OUT/smoke.log"
import torch, coil
f = lambda x: torch.softmax(x * 2 + 1, -1)
for dev in ("cpu", "cuda"):
    x = torch.randn(64, 128, device=dev)
    out = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(out, f(x))
    g = coil.compiled_graphs()[-1]
    print(dev, "ok", g.kernel_names, "eager_fallback" if g.eager_fallback else "")
PY
cd - >/dev/null
timeout "${GPU_TEST_TIMEOUT:-420}" python3 -m pytest tests/gpu -q -p no:cacheprovider --durations=12 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
