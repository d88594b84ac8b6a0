// Provenance for kernel header comments, shared by every renderer: which graph nodes a kernel came
// from (with their ATen ops), the user's source lines, and its buffers (register-only ones
// marked "(local)").
#pragma once

#include <string>
#include <vector>

#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

// The innermost frame of a Python stack trace as "file:line: code" (what the user wrote); empty
// when the trace has no frame.
std::string user_source_line(const std::string& trace);

// "graph nodes: ...", one "source: ..." per distinct user line, "buffers: ...", each without a
// comment marker (the renderer adds "// " or "# ").
std::vector<std::string> provenance_lines(const ir::Program& prog, const sched::Schedule& s,
                                          const sched::Kernel& k);

}  // namespace coil::codegen
