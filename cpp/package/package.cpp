// coil::Package: see cpp/coil/package.h. Kept out of cpp/coil/ because it needs libtorch, which
// the compiler (coil_core) does not link.
#include "coil/package.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <torch/version.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include "coil/graph/json.h"
#include "coil/runtime/aten_shim.h"
#include "coil/runtime/graph_abi.h"
#include "coil/runtime/library.h"

#ifndef COIL_VERSION
#error "COIL_VERSION must be defined (CMake passes the project version)"
#endif

namespace coil {
namespace {

using graph::Json;

constexpr int64_t kMetadataFormat = 1;

// One tensor input of coil_graph_run: a weight of the package or a user input.
struct GraphInput {
  int64_t weight = -1;  // index into Impl::weights
  int64_t user = -1;    // index into run()'s user_inputs
};

const std::map<std::string, at::ScalarType, std::less<>>& dtypes() {
  static const auto* table = new std::map<std::string, at::ScalarType, std::less<>>{
      {"float32", at::kFloat},  {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
      {"float64", at::kDouble}, {"int64", at::kLong},   {"int32", at::kInt},
      {"int16", at::kShort},    {"int8", at::kChar},    {"uint8", at::kByte},
      {"bool", at::kBool}};
  return *table;
}

// "2.13.0+cpu" -> "2.13.0", "2.13.0a0+git12ab" -> "2.13.0": the release, major.minor.patch.
std::string release_version(std::string_view version) {
  std::string out;
  size_t i = 0;
  for (int part = 0; part < 3; ++part) {
    size_t start = i;
    while (i < version.size() && std::isdigit(static_cast<unsigned char>(version[i]))) ++i;
    if (i == start) break;
    if (part > 0) out += '.';
    out.append(version.substr(start, i - start));
    if (i == version.size() || version[i] != '.') break;
    ++i;
  }
  return out;
}

// Reads metadata.json's fields, each failure a PackageError naming the field.
class MetadataReader {
 public:
  explicit MetadataReader(const std::string& path) : path_(path) {}

  PackageError error(const std::string& what) const {
    return PackageError("coil: package '" + path_ + "': " + what);
  }
  const Json& field(const Json& object, const char* key, const std::string& where) const {
    const Json* value = object.is_object() ? object.find(key) : nullptr;
    if (value == nullptr) throw error("metadata.json: " + where + " has no \"" + key + "\"");
    return *value;
  }
  const Json& typed(const Json& object, const char* key, const std::string& where,
                    Json::Type type) const {
    const Json& value = field(object, key, where);
    if (value.type() != type) {
      throw error("metadata.json: " + where + "'s \"" + key + "\" is a JSON " +
                  json_type_name(value.type()) + ", expected a JSON " + json_type_name(type));
    }
    return value;
  }
  int64_t integer(const Json& o, const char* key, const std::string& where) const {
    return typed(o, key, where, Json::Type::Int).as_int();
  }
  const std::string& string(const Json& o, const char* key, const std::string& where) const {
    return typed(o, key, where, Json::Type::String).as_string();
  }
  const std::vector<Json>& array(const Json& o, const char* key, const std::string& where) const {
    return typed(o, key, where, Json::Type::Array).items();
  }
  at::ScalarType dtype(const Json& o, const std::string& where) const {
    const std::string& name = string(o, "dtype", where);
    auto it = dtypes().find(name);
    if (it == dtypes().end()) throw error("metadata.json: " + where + " has unknown dtype " + name);
    return it->second;
  }

 private:
  const std::string& path_;
};

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// A private folder (mode 0700) under $TMPDIR or /tmp for the graph's library.
std::string make_temp_dir(const MetadataReader& meta) {
  const char* base = ::getenv("TMPDIR");
  std::string name = std::string(base && *base ? base : "/tmp") + "/coil-package-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) {
    throw meta.error("cannot create a temporary folder for its library (" + name +
                     "): " + errno_text(errno) + ". Set TMPDIR to a writable folder.");
  }
  return name;
}

// Writes the file (mode 0700); on failure removes it and throws.
void write_file(const std::string& path, std::string_view data, const MetadataReader& meta) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (fd < 0) throw meta.error("cannot write '" + path + "': " + errno_text(errno));
  int err = 0;
  while (!data.empty() && err == 0) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) data.remove_prefix(size_t(n));
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0) return;
  ::unlink(path.c_str());
  throw meta.error("cannot write '" + path + "': " + errno_text(err));
}

}  // namespace

struct Package::Impl {
  std::string path;
  std::string metadata;
  std::string temp_dir;  // holds the library while it is loaded
  std::shared_ptr<runtime::Library> library;
  runtime::GraphRunFn run_fn = nullptr;
  runtime::GraphTextFn error_fn = nullptr;
  std::vector<GraphInput> graph_inputs;
  std::vector<at::Tensor> weights;
  std::vector<std::string> user_names;
  int64_t num_outputs = 0;

  ~Impl() {
    library.reset();
    if (!temp_dir.empty()) ::rmdir(temp_dir.c_str());
  }

  void check_versions(const Json& root, const MetadataReader& meta) const;
  void load_library(const std::string& bytes, const MetadataReader& meta);
  void make_inputs(const Json& root, std::map<std::string, std::string>& entries,
                   const MetadataReader& meta);
};

void Package::Impl::check_versions(const Json& root, const MetadataReader& meta) const {
  const int64_t format = meta.integer(root, "format", "the top level");
  if (format != kMetadataFormat) {
    throw meta.error("metadata format " + std::to_string(format) + ", this coil reads " +
                     std::to_string(kMetadataFormat) + ". Export it again with this coil.");
  }
  const std::string& coil_version = meta.string(root, "coil_version", "the top level");
  if (coil_version != COIL_VERSION) {
    throw meta.error("package made by coil " + coil_version + ", this is coil " + COIL_VERSION +
                     ". Export it again with this coil.");
  }
  const std::string& torch_version = meta.string(root, "torch_version", "the top level");
  if (release_version(torch_version) != release_version(TORCH_VERSION)) {
    throw meta.error("package made by torch " + torch_version + ", this is torch " + TORCH_VERSION +
                     ". Export it again with this torch.");
  }
  const std::string& device = meta.string(root, "device", "the top level");
  if (device == "cuda" && !at::hasCUDA()) {
    throw meta.error(
        "package made for cuda, but this process has no CUDA device (libtorch "
        "without CUDA, or no GPU visible)");
  }
  if (device != "cpu" && device != "cuda") {
    throw meta.error("package made for device '" + device + "'; coil runs cpu and cuda");
  }
}

void Package::Impl::load_library(const std::string& bytes, const MetadataReader& meta) {
  temp_dir = make_temp_dir(meta);
  const std::string so_path = temp_dir + "/graph.so";
  write_file(so_path, bytes, meta);
  runtime::GraphTextFn signature_fn = nullptr;
  runtime::GraphBindFn bind = nullptr;
  try {
    library = runtime::Library::load(so_path);
    run_fn = reinterpret_cast<runtime::GraphRunFn>(library->symbol(runtime::kGraphRunSymbol));
    error_fn = reinterpret_cast<runtime::GraphTextFn>(library->symbol(runtime::kGraphErrorSymbol));
    signature_fn =
        reinterpret_cast<runtime::GraphTextFn>(library->symbol(runtime::kGraphSignatureSymbol));
    bind = reinterpret_cast<runtime::GraphBindFn>(library->symbol(runtime::kGraphBindSymbol));
  } catch (const std::runtime_error& e) {
    ::unlink(so_path.c_str());
    throw meta.error(std::string("cannot load its library: ") + e.what() +
                     " (a temporary folder mounted noexec? set TMPDIR)");
  }
  // The mapping stays; the file is not needed any more. The folder stays until ~Impl so that its
  // name, which the loader knows the library by, is not reused while the library is loaded.
  ::unlink(so_path.c_str());
  // coil's ATen shim (runtime/aten_shim.h), compiled into this library.
  if (bind(coil_aten_shim()) != 0) {
    throw meta.error("its library refused this coil's ATen shim (shim ABI version " +
                     std::to_string(COIL_SHIM_ABI_VERSION) + "). Export it again with this coil.");
  }

  Json signature;
  try {
    signature = graph::parse_json(signature_fn());
  } catch (const graph::JsonError& e) {
    throw meta.error(std::string("its library's signature is not JSON: ") + e.what());
  }
  const std::string where = "the library's signature";
  const int64_t tensors = meta.integer(signature, "tensor_inputs", where);
  const int64_t scalars = meta.integer(signature, "scalar_inputs", where);
  const int64_t outputs = meta.integer(signature, "outputs", where);
  if (tensors != int64_t(graph_inputs.size()) || scalars != 0 || outputs != num_outputs) {
    throw meta.error("its library takes " + std::to_string(tensors) + " tensors and " +
                     std::to_string(scalars) + " ints and gives " + std::to_string(outputs) +
                     " outputs; metadata.json says " + std::to_string(graph_inputs.size()) +
                     " tensors, no ints and " + std::to_string(num_outputs) + " outputs");
  }
}

void Package::Impl::make_inputs(const Json& root, std::map<std::string, std::string>& entries,
                                const MetadataReader& meta) {
  for (const Json& user : meta.array(root, "user_inputs", "the top level")) {
    user_names.push_back(
        meta.string(user, "name", "user input " + std::to_string(user_names.size())));
  }
  const at::Device device(meta.string(root, "device", "the top level"));
  std::map<std::string, int64_t> weight_of_entry;  // a weight listed twice is made once
  for (const Json& input : meta.array(root, "graph_inputs", "the top level")) {
    const std::string where = "graph input " + std::to_string(graph_inputs.size());
    const std::string& kind = meta.string(input, "kind", where);
    GraphInput in;
    if (kind == "user") {
      in.user = meta.integer(input, "index", where);
      if (in.user < 0 || in.user >= int64_t(user_names.size())) {
        throw meta.error("metadata.json: " + where + " is user input " + std::to_string(in.user) +
                         " of " + std::to_string(user_names.size()));
      }
      graph_inputs.push_back(in);
      continue;
    }
    if (kind != "weight") throw meta.error("metadata.json: " + where + " has unknown kind " + kind);
    const std::string& entry = meta.string(input, "entry", where);
    if (auto it = weight_of_entry.find(entry); it != weight_of_entry.end()) {
      in.weight = it->second;
      graph_inputs.push_back(in);
      continue;
    }
    auto data = entries.find(entry);
    if (data == entries.end()) throw meta.error(where + "'s entry '" + entry + "' is missing");
    const at::ScalarType dtype = meta.dtype(input, where);
    std::vector<int64_t> sizes;
    uint64_t nbytes = c10::elementSize(dtype);
    for (const Json& size : meta.array(input, "sizes", where)) {
      if (!size.is_int() || size.as_int() < 0 ||
          (size.as_int() > 0 && nbytes > data->second.size() / uint64_t(size.as_int()))) {
        throw meta.error("metadata.json: " + where + "'s sizes do not fit its entry '" + entry +
                         "' of " + std::to_string(data->second.size()) + " bytes");
      }
      sizes.push_back(size.as_int());
      nbytes *= uint64_t(size.as_int());
    }
    if (nbytes != data->second.size()) {
      throw meta.error("entry '" + entry + "' has " + std::to_string(data->second.size()) +
                       " bytes, its weight needs " + std::to_string(nbytes));
    }
    at::Tensor weight = at::empty(sizes, at::TensorOptions().dtype(dtype));
    if (nbytes > 0) std::memcpy(weight.data_ptr(), data->second.data(), nbytes);
    std::string().swap(data->second);  // the tensor has the bytes now
    in.weight = int64_t(weights.size());
    weight_of_entry.emplace(entry, in.weight);
    weights.push_back(device.is_cpu() ? weight : weight.to(device));
    graph_inputs.push_back(in);
  }
}

Package::Package(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.path = path;
  const MetadataReader meta(p.path);
  std::map<std::string, std::string> entries = runtime::read_package(path);
  auto metadata = entries.find("metadata.json");
  if (metadata == entries.end()) throw meta.error("no entry 'metadata.json'");
  p.metadata = std::move(metadata->second);
  Json root;
  try {
    root = graph::parse_json(p.metadata);
  } catch (const graph::JsonError& e) {
    throw meta.error(std::string("metadata.json is not JSON: ") + e.what());
  }
  if (!root.is_object()) throw meta.error("metadata.json is not a JSON object");
  p.check_versions(root, meta);
  p.num_outputs = meta.integer(root, "num_outputs", "the top level");
  const std::string& library = meta.string(root, "library", "the top level");
  auto library_bytes = entries.find(library);
  if (library_bytes == entries.end()) throw meta.error("no entry '" + library + "'");
  p.make_inputs(root, entries, meta);
  p.load_library(library_bytes->second, meta);
}

Package::~Package() = default;
Package::Package(Package&&) noexcept = default;
Package& Package::operator=(Package&&) noexcept = default;

const std::string& Package::metadata_json() const {
  return impl_->metadata;
}

size_t Package::num_user_inputs() const {
  return impl_->user_names.size();
}

std::vector<at::Tensor> Package::run(const std::vector<at::Tensor>& user_inputs) const {
  const Impl& p = *impl_;
  auto fail = [&](int32_t code, const std::string& what) {
    return RunError(code, "coil: package '" + p.path + "': " + what);
  };
  if (user_inputs.size() != p.user_names.size()) {
    const size_t n = p.user_names.size();
    std::string what = "takes " + std::to_string(n) + (n == 1 ? " input (" : " inputs (");
    for (size_t i = 0; i < n; ++i) what += (i == 0 ? "" : ", ") + p.user_names[i];
    throw fail(runtime::kGraphBadInput, what + "), got " + std::to_string(user_inputs.size()));
  }
  for (size_t i = 0; i < user_inputs.size(); ++i) {
    if (!user_inputs[i].defined()) {
      throw fail(runtime::kGraphBadInput,
                 "input " + std::to_string(i) + " (" + p.user_names[i] + ") is undefined");
    }
  }
  std::vector<void*> outputs(size_t(p.num_outputs), nullptr);
  std::vector<at::Tensor> result;
  result.reserve(outputs.size());
  // Owned handles (graph_abi.h): coil_graph_run deletes each one, on failure too.
  std::vector<void*> handles;
  handles.reserve(p.graph_inputs.size());
  try {
    for (const GraphInput& in : p.graph_inputs) {
      handles.push_back(
          new at::Tensor(in.weight >= 0 ? p.weights[in.weight] : user_inputs[in.user]));
    }
  } catch (...) {
    for (void* h : handles) delete static_cast<at::Tensor*>(h);
    throw;
  }
  const int32_t code = p.run_fn(handles.data(), nullptr, outputs.data());
  if (code != runtime::kGraphOk) throw fail(code, p.error_fn());
  for (void* h : outputs) {
    std::unique_ptr<at::Tensor> owned(static_cast<at::Tensor*>(h));
    result.push_back(owned ? std::move(*owned) : at::Tensor());
  }
  return result;
}

}  // namespace coil
