// runtime::Library — a loaded shared library of compiled kernels.
//
// Library::load opens a shared library (dlopen, RTLD_NOW | RTLD_LOCAL: every symbol is resolved
// up front, and nothing it defines leaks into other kernels' libraries). Guarantees:
//   - One Library per file per process: load() keeps a process-wide map from the file's canonical
//     path to a weak reference, and returns the live Library while anybody holds it. The library
//     is closed (dlclose) when the last shared_ptr goes away.
//   - symbol() never returns null: a missing symbol throws with the dynamic loader's message.
// It does not notice a file replaced on disk while its Library is alive: load() then returns the
// already loaded one (build_shared_library only replaces a library that was missing or corrupt,
// so this does not arise in normal use). Thread-safe.
//
// Tests: tests/cpp/runtime/build_test.cpp (built, loaded and called together).
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace coil::runtime {

class Library {
 public:
  // Throws std::runtime_error (with the dlerror text) when the file cannot be loaded.
  static std::shared_ptr<Library> load(const std::string& so_path);

  // The address of `name`; throws std::runtime_error (with the dlerror text) when it is absent.
  void* symbol(const std::string& name) const;
  // The canonical path the library was loaded from.
  const std::string& path() const { return path_; }

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

 private:
  Library(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}

  std::string path_;
  void* handle_;
};

}  // namespace coil::runtime
