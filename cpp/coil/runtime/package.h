// runtime::write_package / read_package — the container of an ahead-of-time package: one file
// holding named binary entries (the graph's shared library, its weights, metadata.json), each
// with its SHA-256, so that a damaged or truncated file is refused rather than loaded.
//
// File layout, all integers little-endian:
//
//   offset  size  field
//   0       8     magic "COILPKG\0"
//   8       4     format version (kPackageFormatVersion)
//   12      4     entry count N
//   16      8     directory size D, in bytes
//   24      32    SHA-256 of bytes [8, 24) followed by the D directory bytes
//   56      D     directory: N records, in file order, each
//                   4       name size L
//                   L       name (any bytes but NUL; not empty, unique)
//                   8       offset of the entry's bytes from the start of the file
//                   8       entry size
//                   32      SHA-256 of the entry's bytes
//   ...           the entries' bytes, in directory order, each starting at the first multiple of
//                 kPackageAlignment at or after the end of what precedes it (the directory, or the
//                 entry before); the gaps are zero bytes. The file ends where the last entry ends
//                 (where the directory ends when there are no entries).
//
// The alignment lets a later reader map weights in place. Every byte of the file is checked on
// reading: the magic and version first (a later version may lay out what follows differently),
// then the header and directory against their digest, the file size against the layout, the gaps
// for zeros and each entry against its size and SHA-256.
//
// write_package writes a temporary file next to `path` (flushed to disk) and renames it over
// `path`, so readers see the old package or the new one, never a partial one. read_package and
// write_package throw PackageError, whose message starts with "coil: package '<path>': " and
// says what is wrong ("entry 'graph.so' is corrupt (checksum mismatch)", "truncated: ...",
// "not a coil package ...", "format version 2, this coil reads 1").
//
// Tests: tests/cpp/runtime/package_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace coil::runtime {

inline constexpr char kPackageMagic[8] = {'C', 'O', 'I', 'L', 'P', 'K', 'G', '\0'};
inline constexpr uint32_t kPackageFormatVersion = 1;
inline constexpr size_t kPackageHeaderSize = 56;
inline constexpr size_t kPackageAlignment = 64;

class PackageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes `entries` in the given order. Names must be non-empty, unique and free of NUL bytes.
void write_package(const std::string& path,
                   const std::vector<std::pair<std::string, std::string>>& entries);

// Reads and verifies every entry of the package at `path`.
std::map<std::string, std::string> read_package(const std::string& path);

}  // namespace coil::runtime
