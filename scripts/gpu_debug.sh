#!/usr/bin/env bash
# Debugging aid for the GPU machine: how the extension links against libstdc++.
set -uo pipefail
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
env | grep -i -E "flags|cmake|cxx|cc=|ld_" 
python3 -c "import sysconfig; print('LDSHARED', sysconfig.get_config_var('LDSHARED')); print('LDFLAGS', sysconfig.get_config_var('LDFLAGS'))"
SO=$(python3 -c "import coil, os; print(os.path.join(os.path.dirname(coil.__file__), [f for f in os.listdir(os.path.dirname(coil.__file__)) if f.startswith('_C')][0]))" 2>/dev/null)
echo "so: $SO"
ldd "$SO" | head
nm -D --defined-only "$SO" | grep -c " T _ZNSo" 
nm -D --defined-only "$SO" | grep -E "_M_insert|locale" | head -5
g++ --version | head -1; ls -la /lib/x86_64-linux-gnu/libstdc++.so.6*
