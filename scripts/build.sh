#!/usr/bin/env bash
# Builds and installs coil (editable; the C++ build is cached in build/).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-build-isolation -e .
