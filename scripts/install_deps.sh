#!/usr/bin/env bash
# Installs what building and testing coil needs on a fresh Debian machine with Python 3.10+.
set -euo pipefail
PY=${PYTHON:-python3}
if ! [ -e /usr/include/gtest/gtest.h ] || ! command -v clang-format >/dev/null; then
  if command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq libgtest-dev clang-format >/dev/null
  else
    echo "install GoogleTest (libgtest-dev) and clang-format for the C++ tests" >&2
  fi
fi
# chromium: tests/python/test_explain_browser.py opens coil.explain's page in headless Chromium.
if ! command -v chromium >/dev/null; then
  if command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "install Chromium (a chromium binary on PATH) for tests/python/test_explain_browser.py" >&2
  fi
fi
# torch is pinned: the CPU build of exactly this version is what the project is tested with.
"$PY" -m pip install -q "torch==2.13.0"
# expecttest: imported by torch.testing._internal (the OpInfo database of tests/python/test_opinfo.py).
"$PY" -m pip install -q nanobind scikit-build-core cmake ninja pytest pytest-xdist expecttest transformers matplotlib "triton==3.6.0"
