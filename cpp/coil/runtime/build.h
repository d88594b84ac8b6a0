// runtime::build_shared_library — turns generated C++ kernel source into a shared library,
// through a private, content-addressed on-disk cache.
//
// Takes kernel source text and BuildOptions; returns the path of a shared library built from
// exactly that source with exactly that compiler (its `--version` line) and those flags.
// Guarantees:
//   - Cache key: SHA-256 over the source, the compiler command, the flags and the compiler's
//     `--version` first line. Layout: <cache_dir>/<key[0:2]>/<key>/{kernel.cpp, kernel.so,
//     kernel.so.sum, build.log}. build.log is kept only when the compiler printed something.
//   - A lookup is a hit only when kernel.so exists and its size and SHA-256 match kernel.so.sum;
//     a missing, truncated or corrupted library is rebuilt.
//   - Other processes never see a partial kernel.so: the compiler writes a temporary file with a
//     unique name in the entry folder, which is renamed over kernel.so; kernel.so.sum is written
//     (also by rename) after it. Temporary files are removed on failure.
//   - The cache directory must be private: it is created with mode 0700 when missing, and an
//     existing one must be a directory owned by the current user and not writable by group or
//     others, because coil loads and runs code from it.
//   - The compiler runs through posix_spawn, without a shell, so paths may contain spaces and
//     quotes. Its command line is: compiler kernel.cpp flags... -o <temporary .so>.
//   - A large source made of several kernels (each after a kKernelBoundary line) is compiled as
//     several translation units at once, kernel_<i>.cpp -> kernel_<i>.o (everything before the
//     first boundary, the prelude, in each), and linked into kernel.so: a graph's cold build
//     takes the time of its largest part rather than of the whole (see split_source).
// It does not load the library (see library.h) and never evicts old entries.
//
// Tests: tests/cpp/runtime/build_test.cpp.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace coil::runtime {

// Flags for generated kernels: optimized for this machine, OpenMP, no errno from math functions
// (so sqrt and friends vectorize), no contraction into FMA (results match eager's rounding, and
// every kernel rounds an expression the same way). No libmvec: see prelude.h.
std::vector<std::string> default_kernel_flags();

// The line generated C++ sources put before each kernel (codegen: compile.cpp): where a source
// may be cut into translation units.
inline constexpr const char* kKernelBoundary = "// coil: kernel\n";
// The line before a graph's C++ wrapper (codegen/wrapper/cpp_wrapper.h), the last part of its
// source: the wrapper is always a translation unit of its own (it needs none of the kernels'
// prelude; it includes only coil's ATen shim, runtime/aten_shim.h), compiled without a
// precompiled header.
inline constexpr const char* kWrapperBoundary = "// coil: wrapper\n";

// The translation units `source` is compiled as: the text before the first kKernelBoundary line
// followed by a group of its kernels, at most `jobs` groups of about equal size (kernels keep
// their order within a group); one unit, the source itself, when it has no boundary, one kernel,
// or too little code to be worth a second compiler (each unit gets at least ~24 KB of kernels).
// A wrapper (after a kWrapperBoundary line) is a last unit of its own, self-contained.
std::vector<std::string> split_source(const std::string& source, int jobs);

struct BuildOptions {
  // Required. Created (mode 0700) if missing; see the header comment for the checks.
  std::string cache_dir;
  // A program name looked up on PATH, or a path.
  std::string compiler = "g++";
  std::vector<std::string> flags = default_kernel_flags();
  // Testing only: appends a syntax error to the source so that the build fails.
  bool inject_build_failure = false;
  // When set, the text of a header every source of these options starts with (heavy library
  // headers: at::vec's, for vector kernels). It is precompiled once per compiler, flags and text,
  // into <cache_dir>/pch/<key>/{coil_pch.h, coil_pch.h.gch, coil_pch.h.gch.sum} (checked like a
  // library: a corrupt .gch is rebuilt), and sources are compiled with `-include coil_pch.h`. A
  // header that fails to precompile is still included, as text (slower builds, same results).
  std::string precompiled_header;
  // Compilers run at once for one source's translation units (split_source); 0: the environment
  // variable COIL_BUILD_JOBS if set, else the machine's hardware threads, at most 8.
  int jobs = 0;
};

struct BuildResult {
  std::string so_path;
  std::string source_path;
  bool cache_hit = false;
  double seconds = 0.0;  // wall time of the whole call, lookup included
};

// Raised when the cache directory is unusable, the compiler cannot be run, or compilation fails.
// The message says what happened and what to do; for a failed compilation it includes the
// compiler's output (trimmed) and the path of the source file.
class BuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thread-safe; concurrent calls from several threads or processes on one cache are safe.
BuildResult build_shared_library(const std::string& source, const BuildOptions& opts);

}  // namespace coil::runtime
