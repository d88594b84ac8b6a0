// Debug artifacts: the per-graph debug folder and the provenance map (kernel -> graph nodes ->
// user source lines).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"

namespace coil::debug {

// Writes each artifact (file name -> text) into dir, creating it. Throws std::runtime_error
// naming the path when a file cannot be written.
void write_debug_dir(const std::string& dir, const std::map<std::string, std::string>& artifacts);

// {"kernels": {name: {"nodes": [...], "ops": [...], "source_lines": [...]}}}
std::string provenance_json(const ir::Program& prog,
                            const std::vector<codegen::KernelSource>& kernels);

}  // namespace coil::debug
