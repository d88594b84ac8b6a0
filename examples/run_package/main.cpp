// run_package: runs a coil AOT package from C++, without Python (coil::Package, coil/package.h).
//
//   run_package <package> <inputs.pt> [<outputs.pt>]
//
// <inputs.pt> holds the package's user inputs as Python saved them: torch.save([x, y], path)
// (a list or tuple of tensors, or one tensor). Prints each output's dtype, sizes and first
// values; with <outputs.pt>, also saves the outputs as a tuple (None for a None output) that
// Python's torch.load reads. Exits 0, 1 on any error (its message on stderr), 2 on a wrong
// command line.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil/package.h"

namespace {

constexpr int64_t kValuesShown = 6;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// The tensors of what torch.save wrote: a list or tuple of tensors, or one tensor.
std::vector<at::Tensor> load_inputs(const std::string& path) {
  const c10::IValue value = torch::jit::pickle_load(read_file(path));
  if (value.isTensor()) return {value.toTensor()};
  std::vector<c10::IValue> items;
  if (value.isList()) {
    items = value.toListRef().vec();
  } else if (value.isTuple()) {
    items = value.toTupleRef().elements().vec();
  } else {
    throw std::runtime_error("'" + path + "' holds a " + value.tagKind() +
                             ", expected a list of tensors (torch.save([x, ...], path))");
  }
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& item : items) {
    if (!item.isTensor()) {
      throw std::runtime_error("'" + path + "': item " + std::to_string(tensors.size()) + " is a " +
                               item.tagKind() + ", expected a tensor");
    }
    tensors.push_back(item.toTensor());
  }
  return tensors;
}

void print_output(size_t index, const at::Tensor& t) {
  std::cout << "output " << index << ": ";
  if (!t.defined()) {
    std::cout << "None\n";
    return;
  }
  std::cout << c10::toString(t.scalar_type()) << " " << t.sizes() << ":";
  at::Tensor flat = t.detach().to(at::kCPU).reshape({-1});
  const int64_t shown = std::min(flat.numel(), kValuesShown);
  at::Tensor values = flat.slice(0, 0, shown).to(at::kDouble).contiguous();
  for (int64_t i = 0; i < shown; ++i) std::cout << " " << values.data_ptr<double>()[i];
  if (flat.numel() > shown) std::cout << " ...";
  std::cout << "\n";
}

void save_outputs(const std::string& path, const std::vector<at::Tensor>& outputs) {
  // A tuple: torch.load's default weights_only unpickler refuses the type tag a list would get.
  std::vector<c10::IValue> items;
  for (const at::Tensor& t : outputs) items.push_back(t.defined() ? c10::IValue(t) : c10::IValue());
  const std::vector<char> bytes = torch::jit::pickle_save(c10::ivalue::Tuple::create(items));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: run_package <package> <inputs.pt> [<outputs.pt>]\n";
    return 2;
  }
  try {
    const coil::Package package(argv[1]);
    const std::vector<at::Tensor> outputs = package.run(load_inputs(argv[2]));
    for (size_t i = 0; i < outputs.size(); ++i) print_output(i, outputs[i]);
    if (argc == 4) save_outputs(argv[3], outputs);
  } catch (const c10::Error& e) {
    std::cerr << "run_package: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "run_package: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
