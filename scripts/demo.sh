#!/usr/bin/env bash
# Sets up coil on a fresh machine and runs the demo: compile a small model, show the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
${PYTHON:-python3} examples/demo.py
