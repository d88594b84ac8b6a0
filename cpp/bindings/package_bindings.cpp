// Python bindings for coil::runtime's package container (runtime/package.h).
//
// bind_package(m) adds to coil._C:
//   write_package(path, entries: dict[str, bytes]): writes the entries in the dict's order.
//   read_package(path) -> dict[str, bytes]: every entry, verified, in name order.
//   PackageError: a RuntimeError subclass, raised by both with runtime::PackageError's message.
//   PACKAGE_FORMAT_VERSION: the container format version this coil writes and reads.
//   COIL_VERSION: the project version compiled in (CMake's project VERSION), which coil::Package
//       requires a package's metadata.json to name.
// The GIL is released while files are read and written.
//
// Tests: tests/python/test_package_cpp.py; the container itself in tests/cpp/runtime/.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coil/runtime/package.h"

namespace nb = nanobind;

void bind_package(nb::module_& m) {
  nb::exception<coil::runtime::PackageError>(m, "PackageError", PyExc_RuntimeError);
  m.attr("PACKAGE_FORMAT_VERSION") = coil::runtime::kPackageFormatVersion;
  m.attr("COIL_VERSION") = COIL_VERSION;

  m.def(
      "write_package",
      [](const std::string& path, nb::dict entries) {
        std::vector<std::pair<std::string, std::string>> items;
        items.reserve(entries.size());
        for (auto [key, value] : entries) {
          if (!nb::isinstance<nb::str>(key) || !nb::isinstance<nb::bytes>(value)) {
            throw nb::type_error("write_package: entries must map str names to bytes");
          }
          nb::bytes data = nb::borrow<nb::bytes>(value);
          items.emplace_back(nb::cast<std::string>(key), std::string(data.c_str(), data.size()));
        }
        nb::gil_scoped_release release;
        coil::runtime::write_package(path, items);
      },
      nb::arg("path"), nb::arg("entries"),
      "Writes a coil package: the entries (name -> bytes) in the dict's order, each with its "
      "SHA-256, atomically (a temporary file renamed over `path`). Raises PackageError "
      "(a RuntimeError) on invalid names or a failed write.");
  m.def(
      "read_package",
      [](const std::string& path) {
        std::map<std::string, std::string> entries;
        {
          nb::gil_scoped_release release;
          entries = coil::runtime::read_package(path);
        }
        nb::dict out;
        for (const auto& [name, data] : entries)
          out[name.c_str()] = nb::bytes(data.data(), data.size());
        return out;
      },
      nb::arg("path"),
      "Reads and verifies a coil package; returns its entries (name -> bytes) in name order. "
      "Raises PackageError (a RuntimeError) saying what is wrong: a missing file, not a package, "
      "another format version, truncation, or a corrupt directory or entry.");
}
