#!/usr/bin/env bash
# Sets up coil on a fresh machine and runs the demo: compile a small model, show the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
# The first time: pip builds coil's C++ core, about 10 CPU-minutes of compiling (~2 minutes on 8
# cores, ~5 on 2); later runs reuse build/ and take seconds.
bash scripts/build.sh
echo "setup (Python packages, C++ build): ${SECONDS} s"
${PYTHON:-python3} examples/demo.py
