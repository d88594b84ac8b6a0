#!/usr/bin/env bash
# Runs every test: the C++ unit tests (GoogleTest, via CMake/CTest), then the Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}

# C++ formatting (STYLE.md rule 16): the checked-in .clang-format is the reference.
if command -v clang-format >/dev/null; then
  git ls-files 'cpp/*.cpp' 'cpp/*.h' 'tests/cpp/*.cpp' 'tests/cpp/*.h' | xargs clang-format --dry-run --Werror
  echo "clang-format: clean"
fi

cmake -S . -B build-tests -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_PYTHON=OFF -DCOIL_BUILD_TESTS=ON >/dev/null
cmake --build build-tests -j "$JOBS"
(cd build-tests && ctest --output-on-failure)

bash scripts/build.sh
# Two worker processes (pytest-xdist; TEST_WORKERS overrides, 0 runs in this process): one
# compiles kernels while the other traces and runs, about half the wall time on 2 cores (cold
# caches, 2026-12-05: 16 min against 30 serially).
WORKERS=${TEST_WORKERS:-2}
if [ "$WORKERS" = "0" ]; then
  "$PY" -m pytest tests/python -q -p no:cacheprovider "$@"
else
  "$PY" -m pytest tests/python -q -p no:cacheprovider -n "$WORKERS" "$@"
fi
