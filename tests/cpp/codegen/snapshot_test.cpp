// Generated-code snapshots: for a fixed set of small graphs (tests/cpp/test_graphs.h), the kernel
// source, the wrapper, the schedule and the fusion verdicts must match the files checked in under
// tests/snapshots/<graph>.<artifact>[.txt]. A refactor must leave them unchanged; a heuristic
// change shows, in the diff of these files, exactly which kernels it changed.
//
// To accept new output after an intended change, rerun with COIL_UPDATE_SNAPSHOTS=1 and review
// the diff of tests/snapshots/ before committing it.
//
// The C++ prelude (cpp/coil/codegen/cpp/prelude.h) is the same for every graph; it is replaced by
// one marker line so that a prelude edit does not touch every snapshot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../test_graphs.h"
#include "coil/codegen/cpp/prelude.h"
#include "coil/codegen/wrapper/cpp_wrapper_runtime.h"
#include "coil/compile.h"
#include "coil/runtime/aten_shim_text.h"

namespace coil::codegen {
namespace {

namespace fs = std::filesystem;

const char* const kArtifacts[] = {"kernels.cpp", "output_code.py", "schedule.txt", "fusion.txt"};
const char* const kPreludeMarker = "// <coil prelude: cpp/coil/codegen/cpp/prelude.h>\n";

fs::path snapshot_dir() {
  return (fs::path(__FILE__).parent_path() / ".." / ".." / "snapshots").lexically_normal();
}

// <graph>.<artifact>, with ".txt" appended unless the artifact already is a .txt file, so that
// every snapshot is plain text to tools (no linter or compiler picks up a .py or .cpp snapshot).
std::string snapshot_file(const std::string& graph, const std::string& artifact) {
  bool is_txt = artifact.size() >= 4 && artifact.compare(artifact.size() - 4, 4, ".txt") == 0;
  return graph + "." + artifact + (is_txt ? "" : ".txt");
}

bool updating() {
  const char* v = std::getenv("COIL_UPDATE_SNAPSHOTS");
  return v && std::string(v) == "1";
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A unified-style diff (longest common subsequence of lines) of expected and actual, showing the
// first hunks only: "-" lines are expected, "+" lines are what the compiler generated now.
std::string line_diff(const std::string& expected, const std::string& actual) {
  std::vector<std::string> e = split_lines(expected), a = split_lines(actual);
  // lcs[i][j]: length of the LCS of e[i:] and a[j:]. Snapshots are small (hundreds of lines).
  std::vector<std::vector<int>> lcs(e.size() + 1, std::vector<int>(a.size() + 1, 0));
  for (size_t i = e.size(); i-- > 0;) {
    for (size_t j = a.size(); j-- > 0;) {
      lcs[i][j] = e[i] == a[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Line {
    char tag;     // ' ', '-', '+'
    size_t line;  // 1-based, in expected for ' ' and '-', in actual for '+'
    const std::string* text;
  };
  std::vector<Line> script;
  size_t i = 0, j = 0;
  while (i < e.size() || j < a.size()) {
    if (i < e.size() && j < a.size() && e[i] == a[j]) {
      script.push_back({' ', i + 1, &e[i]});
      ++i, ++j;
    } else if (i < e.size() && (j == a.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      script.push_back({'-', i + 1, &e[i]});
      ++i;
    } else {
      script.push_back({'+', j + 1, &a[j]});
      ++j;
    }
  }
  constexpr size_t kContext = 2, kMaxLines = 40;
  std::ostringstream out;
  size_t printed = 0, last = 0;
  bool any = false;
  for (size_t k = 0; k < script.size() && printed < kMaxLines; ++k) {
    bool near_change = false;
    for (size_t d = k >= kContext ? k - kContext : 0; d <= k + kContext && d < script.size(); ++d) {
      near_change |= script[d].tag != ' ';
    }
    if (!near_change) continue;
    if (!any || k > last + 1) out << "@@ expected line " << script[k].line << " @@\n";
    out << script[k].tag << " " << *script[k].text << "\n";
    any = true;
    last = k;
    ++printed;
  }
  if (printed == kMaxLines) out << "... (diff truncated)\n";
  if (!any) out << "(the texts differ only in line endings or a final newline)\n";
  return out.str();
}

class Snapshot : public ::testing::TestWithParam<test::NamedGraph> {};

TEST_P(Snapshot, MatchesCheckedInFiles) {
  const test::NamedGraph& named = GetParam();
  CompileOptions opts;
  opts.title = named.name;
  CompileResult r = compile_graph(named.build(), opts);

  fs::path dir = snapshot_dir();
  for (const char* artifact : kArtifacts) {
    auto it = r.artifacts.find(artifact);
    std::string actual = it == r.artifacts.end()
                             ? std::string("<no ") + artifact + ": the graph has no kernels>\n"
                             : replace_all(it->second, cpp::kPrelude, kPreludeMarker);
    fs::path file = dir / snapshot_file(named.name, artifact);
    if (updating()) {
      fs::create_directories(dir);
      std::ofstream(file, std::ios::binary) << actual;
      continue;
    }
    ASSERT_TRUE(fs::exists(file)) << "missing snapshot " << file
                                  << "\nCreate it with: COIL_UPDATE_SNAPSHOTS=1 ./coil_tests "
                                     "--gtest_filter='*Snapshot*'";
    std::string expected = read_file(file);
    EXPECT_TRUE(expected == actual)
        << "generated " << artifact << " for graph '" << named.name << "' differs from " << file
        << "\n"
        << line_diff(expected, actual)
        << "If the change is intended, update the snapshots with:\n"
           "  COIL_UPDATE_SNAPSHOTS=1 ./coil_tests --gtest_filter='*Snapshot*'\n"
           "and review `git diff tests/snapshots`.";
  }
}

// The C++ wrapper of each graph (option cpp_wrapper, input checks on): its runtime helpers
// replaced by a marker; a graph it cannot wrap snapshots the reason.
class CppWrapperSnapshot : public ::testing::TestWithParam<test::NamedGraph> {};

TEST_P(CppWrapperSnapshot, MatchesCheckedInFiles) {
  const test::NamedGraph& named = GetParam();
  CompileOptions opts;
  opts.title = named.name;
  opts.cpp_wrapper = true;
  opts.cpp_wrapper_checks = true;
  CompileResult r = compile_graph(named.build(), opts);
  auto it = r.artifacts.find("wrapper.cpp");
  std::string actual =
      it == r.artifacts.end()
          ? "<no wrapper.cpp: " + r.cpp_wrapper_blocker + ">\n"
          : replace_all(replace_all(replace_all(it->second, kCppWrapperRuntime,
                                                "// <cpp_wrapper_runtime.h>\n"),
                                    runtime::kAtenShimHeader, "// <runtime/aten_shim.h>\n"),
                        cpp::kSizeArithmetic, "// <size arithmetic: cpp/prelude.h>\n");
  EXPECT_EQ(r.wrapper, it == r.artifacts.end() ? "python" : "cpp");
  fs::path file = snapshot_dir() / snapshot_file(named.name, "wrapper.cpp");
  if (updating()) {
    std::ofstream(file, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(file)) << "missing snapshot " << file;
  std::string expected = read_file(file);
  EXPECT_TRUE(expected == actual) << "generated wrapper.cpp for graph '" << named.name
                                  << "' differs from " << file << "\n"
                                  << line_diff(expected, actual);
}

INSTANTIATE_TEST_SUITE_P(Graphs, CppWrapperSnapshot, ::testing::ValuesIn(test::snapshot_graphs()),
                         [](const ::testing::TestParamInfo<test::NamedGraph>& info) {
                           return info.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(Graphs, Snapshot, ::testing::ValuesIn(test::snapshot_graphs()),
                         [](const ::testing::TestParamInfo<test::NamedGraph>& info) {
                           return info.param.name;
                         });

// The snapshot set itself must stay fixed: a graph silently dropped from the list would stop
// being compared without any test failing.
TEST(SnapshotSet, EveryCheckedInFileHasAGraph) {
  if (updating()) GTEST_SKIP() << "updating snapshots";
  std::vector<std::string> names;
  for (const auto& g : test::snapshot_graphs()) names.push_back(g.name);
  for (const auto& entry : fs::directory_iterator(snapshot_dir())) {
    std::string file = entry.path().filename().string();
    std::string graph = file.substr(0, file.find('.'));
    EXPECT_NE(std::find(names.begin(), names.end(), graph), names.end())
        << "tests/snapshots/" << file << " belongs to no graph in test::snapshot_graphs()";
  }
}

// The prelude marker must actually replace the prelude (otherwise every snapshot embeds it).
TEST(SnapshotSet, PreludeIsFactoredOut) {
  CompileResult r = compile_graph(test::pointwise_chain(), CompileOptions{});
  ASSERT_TRUE(r.artifacts.count("kernels.cpp"));
  std::string kernels = replace_all(r.artifacts.at("kernels.cpp"), cpp::kPrelude, kPreludeMarker);
  EXPECT_EQ(kernels.rfind(kPreludeMarker, 0), 0u) << kernels.substr(0, 200);
  std::string wrapper = replace_all(r.output_code, cpp::kPrelude, kPreludeMarker);
  EXPECT_NE(wrapper.find(kPreludeMarker), std::string::npos);
}

}  // namespace
}  // namespace coil::codegen
