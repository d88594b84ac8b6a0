#include "coil/runtime/library.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>

namespace coil::runtime {
namespace {

// The process-wide registry behind "one Library per file". Entries whose Library has died are
// erased by its destructor.
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<Library>> libraries;
};

Registry& registry() {
  // Never destroyed, so that Library objects outliving static destruction can still unregister.
  static Registry* instance = new Registry();
  return *instance;
}

std::string dlerror_text() {
  const char* text = ::dlerror();
  return text ? text : "(the dynamic loader gave no reason)";
}

}  // namespace

std::shared_ptr<Library> Library::load(const std::string& so_path) {
  char resolved[PATH_MAX];
  if (::realpath(so_path.c_str(), resolved) == nullptr) {
    throw std::runtime_error("coil: cannot load kernel library '" + so_path +
                             "': " + std::error_code(errno, std::generic_category()).message() +
                             ". Expected a path returned by build_shared_library.");
  }
  const std::string path = resolved;

  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::weak_ptr<Library>& entry = reg.libraries[path];
  if (std::shared_ptr<Library> alive = entry.lock()) return alive;

  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string reason = dlerror_text();
    reg.libraries.erase(path);
    throw std::runtime_error("coil: dlopen failed for kernel library '" + path + "': " + reason +
                             ". If the file is damaged, building it again replaces it.");
  }
  std::shared_ptr<Library> library(new Library(path, handle));
  entry = library;
  return library;
}

void* Library::symbol(const std::string& name) const {
  ::dlerror();  // clear any earlier error so that the one read below is ours
  void* address = ::dlsym(handle_, name.c_str());
  if (address == nullptr) {
    throw std::runtime_error("coil: symbol '" + name + "' not found in kernel library '" + path_ +
                             "': " + dlerror_text() +
                             ". Expected the generated source to define extern \"C\" " + name +
                             "; check the name passed by the caller against kernel.cpp.");
  }
  return address;
}

Library::~Library() {
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.libraries.find(path_);
    // A concurrent load() may already have registered a new Library for this path.
    if (it != reg.libraries.end() && it->second.expired()) reg.libraries.erase(it);
  }
  ::dlclose(handle_);
}

}  // namespace coil::runtime
