#include "coil/codegen/kernel_dedup.h"

#include <cctype>
#include <sstream>
#include <unordered_map>

#include "coil/codegen/kernel_args.h"

namespace coil::codegen {
namespace {

bool is_triton(const KernelSource& k) {
  return k.name.rfind("triton_", 0) == 0;
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The line without its comment: whole-line comments become empty, trailing ones (two spaces
// and the marker, as the renderers write them) are cut. C++'s "#pragma" lines are code.
std::string strip_comment(const std::string& line, const std::string& marker) {
  size_t first = line.find_first_not_of(' ');
  if (first == std::string::npos || line.compare(first, marker.size(), marker) == 0) return "";
  size_t trailing = line.find("  " + marker + " ");
  return trailing == std::string::npos ? line : line.substr(0, trailing);
}

// Replaces every whole-word occurrence of `word` in `text` with `by`.
std::string replace_word(const std::string& text, const std::string& word, const std::string& by) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t at = text.find(word, i);
    if (at == std::string::npos) break;
    bool starts = at == 0 || !ident_char(text[at - 1]);
    bool ends = at + word.size() == text.size() || !ident_char(text[at + word.size()]);
    out += text.substr(i, at - i);
    out += starts && ends ? by : word;
    i = at + word.size();
  }
  return out + text.substr(i);
}

// "buf<digits>" not preceded by a letter or digit (v_buf3 and acc_buf3 count), renumbered
// buf#0, buf#1, ... in order of first appearance.
std::string renumber_buffers(const std::string& text) {
  std::unordered_map<std::string, std::string> names;
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool at_buf = text.compare(i, 3, "buf") == 0 && i + 3 < text.size() &&
                  std::isdigit(static_cast<unsigned char>(text[i + 3])) &&
                  (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])));
    if (!at_buf) {
      out += text[i++];
      continue;
    }
    size_t end = i + 3;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    std::string name = text.substr(i, end - i);
    auto [it, fresh] = names.emplace(name, "buf#" + std::to_string(names.size()));
    out += it->second;
    i = end;
  }
  return out;
}

std::string configs_key(const KernelLaunch& l) {
  std::ostringstream out;
  out << l.kind;
  for (const LaunchConfig& c : l.configs)
    out << " " << c.yblock << "x" << c.xblock << "x" << c.rblock << "/" << c.num_warps;
  return out.str();
}

}  // namespace

std::string normalized_kernel_text(const ir::Program& prog, const KernelSource& k) {
  const std::string marker = is_triton(k) ? "#" : "//";
  std::istringstream in(k.code);
  std::string line, code;
  while (std::getline(in, line)) {
    std::string kept = strip_comment(line, marker);
    if (!kept.empty()) code += kept + "\n";
  }
  code = renumber_buffers(replace_word(code, k.name, "KERNEL"));
  code += "args:";
  for (const KernelArg& a : k.args) {
    graph::DType d =
        a.buffer == kIndexErrorArg ? graph::DType::Int64 : prog.buffer(a.buffer).layout.dtype;
    code += std::string(" ") + graph::dtype_name(d) + (a.written ? "(w)" : "");
  }
  code += "\n";
  if (is_triton(k)) code += "launch: " + configs_key(k.launch) + "\n";
  return code;
}

int mark_identical_kernels(const ir::Program& prog, std::vector<KernelSource>& kernels) {
  std::unordered_map<std::string, size_t> first_with;
  int marked = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelSource& k = kernels[i];
    auto [it, fresh] = first_with.emplace(normalized_kernel_text(prog, k), i);
    if (fresh) continue;
    k.same_code_as = kernels[it->second].name;
    ++marked;
    // The decision goes after the first header line (the kernel's name).
    std::string note = std::string(is_triton(k) ? "# " : "// ") + "decision: same code as " +
                       k.same_code_as + " (names aside): compiled once, launched here too";
    size_t eol = k.code.find('\n');
    k.code.insert(eol == std::string::npos ? k.code.size() : eol + 1, note + "\n");
  }
  return marked;
}

}  // namespace coil::codegen
