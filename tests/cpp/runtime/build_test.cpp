// Tests for runtime/build.h: build a kernel, load and call it, cache hits, rebuilds of damaged
// entries, build failures, and the private-cache-directory rules. Each test uses its own
// temporary directory.
#include "coil/runtime/build.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "coil/runtime/library.h"

namespace coil::runtime {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAddSource = R"(
#include <cstdint>
extern "C" void add_f32(void* const* ptrs, const int64_t* ints) {
  const float* a = static_cast<const float*>(ptrs[0]);
  const float* b = static_cast<const float*>(ptrs[1]);
  float* out = static_cast<float*>(ptrs[2]);
  for (int64_t i = 0; i < ints[0]; ++i) out[i] = a[i] + b[i];
}
)";

using KernelFn = void (*)(void* const*, const int64_t*);

class BuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/coil_build_test.XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
    opts_.cache_dir = root_ + "/cache";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
  BuildOptions opts_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Loads the add kernel from so_path and checks that it adds.
void expect_add_kernel_works(const std::string& so_path) {
  std::shared_ptr<Library> library = Library::load(so_path);
  auto add = reinterpret_cast<KernelFn>(library->symbol("add_f32"));
  std::vector<float> a = {1, 2, 3, 4, 5}, b = {10, 20, 30, 40, 50}, out(5, 0);
  void* ptrs[] = {a.data(), b.data(), out.data()};
  int64_t ints[] = {int64_t(out.size())};
  add(ptrs, ints);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44, 55}));
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(BuildTest, BuildsLoadsAndCallsAKernel) {
  BuildResult result = build_shared_library(kAddSource, opts_);
  EXPECT_FALSE(result.cache_hit);
  EXPECT_GT(result.seconds, 0.0);
  EXPECT_EQ(read_file(result.source_path), kAddSource);
  EXPECT_TRUE(fs::exists(result.so_path + ".sum"));
  // <cache_dir>/<key[0:2]>/<key>/kernel.so
  fs::path entry = fs::path(result.so_path).parent_path();
  EXPECT_EQ(entry.parent_path().parent_path(), fs::path(opts_.cache_dir));
  EXPECT_EQ(entry.filename().string().size(), 64u);
  EXPECT_EQ(entry.parent_path().filename().string(), entry.filename().string().substr(0, 2));
  EXPECT_EQ(files_in(entry),
            (std::vector<std::string>{"kernel.cpp", "kernel.so", "kernel.so.sum"}));
  expect_add_kernel_works(result.so_path);
}

// A source that needs the precompiled header's declarations: it builds only if the header is
// included before it (precompiled, or as text where precompiling fails).
constexpr const char* kScaleSource = R"(
extern "C" void add_f32(void* const* ptrs, const int64_t* ints) {
  const float* a = static_cast<const float*>(ptrs[0]);
  const float* b = static_cast<const float*>(ptrs[1]);
  float* out = static_cast<float*>(ptrs[2]);
  for (int64_t i = 0; i < ints[0]; ++i) out[i] = coil_test_add(a[i], b[i]);
}
)";

TEST_F(BuildTest, PrecompiledHeaderIsBuiltOnceInTheCacheAndIncluded) {
  opts_.precompiled_header =
      "#include <cstdint>\ninline float coil_test_add(float a, float b) { return a + b; }\n";
  BuildResult first = build_shared_library(kScaleSource, opts_);
  expect_add_kernel_works(first.so_path);
  std::vector<std::string> pch = files_in(opts_.cache_dir + "/pch");
  ASSERT_EQ(pch.size(), 1u);
  std::string entry = opts_.cache_dir + "/pch/" + pch[0];
  EXPECT_EQ(files_in(entry),
            (std::vector<std::string>{"coil_pch.h", "coil_pch.h.gch", "coil_pch.h.gch.sum"}));
  EXPECT_EQ(read_file(entry + "/coil_pch.h"), opts_.precompiled_header);
  // The header's text is part of the key; the same one is reused, not built again.
  BuildResult again = build_shared_library(std::string(kScaleSource) + "// v2\n", opts_);
  expect_add_kernel_works(again.so_path);
  EXPECT_EQ(files_in(opts_.cache_dir + "/pch").size(), 1u);
}

TEST_F(BuildTest, SecondBuildIsACacheHit) {
  BuildResult first = build_shared_library(kAddSource, opts_);
  BuildResult second = build_shared_library(kAddSource, opts_);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.so_path, first.so_path);
  EXPECT_EQ(second.source_path, first.source_path);
  expect_add_kernel_works(second.so_path);
}

TEST_F(BuildTest, SourceAndFlagsArePartOfTheKey) {
  BuildResult base = build_shared_library(kAddSource, opts_);
  BuildResult other_source = build_shared_library(std::string(kAddSource) + "// x\n", opts_);
  BuildOptions other_opts = opts_;
  other_opts.flags.push_back("-DCOIL_TEST_FLAG=1");
  BuildResult other_flags = build_shared_library(kAddSource, other_opts);
  EXPECT_FALSE(other_source.cache_hit);
  EXPECT_FALSE(other_flags.cache_hit);
  EXPECT_NE(other_source.so_path, base.so_path);
  EXPECT_NE(other_flags.so_path, base.so_path);
  EXPECT_NE(other_flags.so_path, other_source.so_path);
}

TEST_F(BuildTest, TruncatedLibraryIsRebuilt) {
  BuildResult first = build_shared_library(kAddSource, opts_);
  fs::resize_file(first.so_path, fs::file_size(first.so_path) / 2);
  BuildResult second = build_shared_library(kAddSource, opts_);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(second.so_path, first.so_path);
  expect_add_kernel_works(second.so_path);
  EXPECT_TRUE(build_shared_library(kAddSource, opts_).cache_hit);
}

TEST_F(BuildTest, GarbageLibraryOfTheSameSizeIsRebuilt) {
  BuildResult first = build_shared_library(kAddSource, opts_);
  write_file(first.so_path, std::string(fs::file_size(first.so_path), 'x'));
  BuildResult second = build_shared_library(kAddSource, opts_);
  EXPECT_FALSE(second.cache_hit);
  expect_add_kernel_works(second.so_path);
}

TEST_F(BuildTest, MissingLibraryOrDamagedSumIsRebuilt) {
  BuildResult first = build_shared_library(kAddSource, opts_);
  fs::remove(first.so_path);
  EXPECT_FALSE(build_shared_library(kAddSource, opts_).cache_hit);
  write_file(first.so_path + ".sum", "garbage");
  EXPECT_FALSE(build_shared_library(kAddSource, opts_).cache_hit);
  fs::remove(first.so_path + ".sum");
  EXPECT_FALSE(build_shared_library(kAddSource, opts_).cache_hit);
  EXPECT_TRUE(build_shared_library(kAddSource, opts_).cache_hit);
  expect_add_kernel_works(first.so_path);
}

TEST_F(BuildTest, FailedBuildRaisesBuildErrorWithSourcePathAndCompilerOutput) {
  opts_.inject_build_failure = true;
  std::string message;
  try {
    build_shared_library(kAddSource, opts_);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    message = e.what();
  }
  // The message names the source file, which holds the failing source.
  std::string marker = "source:  ";
  size_t at = message.find(marker);
  ASSERT_NE(at, std::string::npos) << message;
  std::string source_path = message.substr(at + marker.size());
  source_path = source_path.substr(0, source_path.find('\n'));
  EXPECT_EQ(source_path.rfind(opts_.cache_dir, 0), 0u) << message;
  EXPECT_NE(read_file(source_path).find("coil_injected_build_failure"), std::string::npos);
  // The compiler's own diagnosis is in the message.
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("coil_injected_build_failure"), std::string::npos) << message;
  // No temporary files are left: only the source and the compiler log.
  EXPECT_EQ(files_in(fs::path(source_path).parent_path()),
            (std::vector<std::string>{"build.log", "kernel.cpp"}));
}

TEST_F(BuildTest, FailedBuildDoesNotPoisonTheGoodEntry) {
  BuildOptions failing = opts_;
  failing.inject_build_failure = true;
  EXPECT_THROW(build_shared_library(kAddSource, failing), BuildError);
  BuildResult good = build_shared_library(kAddSource, opts_);
  EXPECT_FALSE(good.cache_hit);
  expect_add_kernel_works(good.so_path);
}

TEST_F(BuildTest, NewDirectoriesArePrivate) {
  opts_.cache_dir = root_ + "/nested/deeper/cache";
  BuildResult result = build_shared_library(kAddSource, opts_);
  fs::path entry = fs::path(result.so_path).parent_path();
  EXPECT_EQ(mode_of(root_ + "/nested"), 0700u);
  EXPECT_EQ(mode_of(opts_.cache_dir), 0700u);
  EXPECT_EQ(mode_of(entry.parent_path()), 0700u);
  EXPECT_EQ(mode_of(entry), 0700u);
}

TEST_F(BuildTest, WorldWritableCacheDirIsRejected) {
  ASSERT_EQ(::mkdir(opts_.cache_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(opts_.cache_dir.c_str(), 0777), 0);
  try {
    build_shared_library(kAddSource, opts_);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(opts_.cache_dir), std::string::npos) << message;
    EXPECT_NE(message.find("0777"), std::string::npos) << message;
    EXPECT_NE(message.find("chmod go-w"), std::string::npos) << message;
  }
}

TEST_F(BuildTest, GroupWritableCacheDirIsRejected) {
  ASSERT_EQ(::mkdir(opts_.cache_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(opts_.cache_dir.c_str(), 0770), 0);
  EXPECT_THROW(build_shared_library(kAddSource, opts_), BuildError);
}

TEST_F(BuildTest, CacheDirThatIsAFileIsRejected) {
  write_file(opts_.cache_dir, "not a directory");
  try {
    build_shared_library(kAddSource, opts_);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
}

TEST_F(BuildTest, EmptyCacheDirIsRejected) {
  opts_.cache_dir = "";
  EXPECT_THROW(build_shared_library(kAddSource, opts_), BuildError);
}

TEST_F(BuildTest, MissingCompilerGivesBuildError) {
  opts_.compiler = root_ + "/no-such-compiler";
  try {
    build_shared_library(kAddSource, opts_);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-compiler"), std::string::npos) << e.what();
  }
}

TEST_F(BuildTest, PathsWithSpacesWork) {
  opts_.cache_dir = root_ + "/a dir with 'quotes' and spaces/cache";
  BuildResult result = build_shared_library(kAddSource, opts_);
  expect_add_kernel_works(result.so_path);
  EXPECT_TRUE(build_shared_library(kAddSource, opts_).cache_hit);
}

TEST_F(BuildTest, ConcurrentBuildsOfOneKernelAllSucceed) {
  constexpr int kThreads = 4;
  std::vector<BuildResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { results[i] = build_shared_library(kAddSource, opts_); });
  }
  for (std::thread& t : threads) t.join();
  for (const BuildResult& r : results) EXPECT_EQ(r.so_path, results[0].so_path);
  expect_add_kernel_works(results[0].so_path);
  // No temporary files are left behind.
  EXPECT_EQ(files_in(fs::path(results[0].so_path).parent_path()),
            (std::vector<std::string>{"kernel.cpp", "kernel.so", "kernel.so.sum"}));
  EXPECT_TRUE(build_shared_library(kAddSource, opts_).cache_hit);
}

}  // namespace
}  // namespace coil::runtime

namespace coil::runtime {
namespace {

// A kernel of about `bytes` bytes: out[i] = a[i] * k, padded with a comment.
std::string big_kernel(const std::string& name, int k, size_t bytes) {
  std::string code = std::string(kKernelBoundary) + "extern \"C\" void " + name +
                     "(void* const* ptrs, const int64_t* ints) {\n"
                     "  const float* a = static_cast<const float*>(ptrs[0]);\n"
                     "  float* out = static_cast<float*>(ptrs[2]);\n"
                     "  for (int64_t i = 0; i < ints[0]; ++i) out[i] = coil_scale(a[i], " +
                     std::to_string(k) + ");\n}\n";
  while (code.size() < bytes) code += "// padding padding padding padding padding padding\n";
  return code;
}

const std::string kPrefix =
    "#include <cstdint>\nstatic inline float coil_scale(float x, int k) { return x * k; }\n";

TEST(SplitSource, CutsAtKernelBoundariesIntoBalancedUnitsEachWithThePrefix) {
  std::string source = kPrefix;
  for (int k = 0; k < 5; ++k) source += big_kernel("k" + std::to_string(k), k, 20000 + 5000 * k);
  std::vector<std::string> units = split_source(source, 2);
  ASSERT_EQ(units.size(), 2u);
  size_t total = 0;
  for (const std::string& u : units) {
    EXPECT_EQ(u.rfind(kPrefix, 0), 0u);
    total += u.size() - kPrefix.size();
  }
  EXPECT_EQ(total, source.size() - kPrefix.size());  // every kernel exactly once
  for (int k = 0; k < 5; ++k) {
    std::string name = "void k" + std::to_string(k) + "(";
    int found = 0;
    for (const std::string& u : units) found += u.find(name) != std::string::npos;
    EXPECT_EQ(found, 1) << name;
  }
  EXPECT_LT(std::max(units[0].size(), units[1].size()), source.size() * 2 / 3);
  // Too little code, one kernel, or one job: the source itself.
  EXPECT_EQ(split_source(kPrefix + big_kernel("a", 1, 500) + big_kernel("b", 2, 500), 4).size(),
            1u);
  EXPECT_EQ(split_source(kPrefix + big_kernel("a", 1, 90000), 4).size(), 1u);
  EXPECT_EQ(split_source(source, 1).size(), 1u);
}

TEST(SplitSource, AWrapperIsAUnitOfItsOwn) {
  const std::string wrapper =
      std::string(kWrapperBoundary) + "extern \"C\" int run() { return 0; }\n";
  std::string kernels = kPrefix + big_kernel("a", 1, 500) + big_kernel("b", 2, 500);
  std::vector<std::string> units = split_source(kernels + wrapper, 4);
  ASSERT_EQ(units.size(), 2u);  // the kernels (too small to split), then the wrapper alone
  EXPECT_EQ(units[0], kernels);
  EXPECT_EQ(units[1], wrapper);
  EXPECT_EQ(split_source(kernels + wrapper, 1).size(), 2u);
  std::string many = kPrefix;
  for (int k = 0; k < 4; ++k) many += big_kernel("k" + std::to_string(k), k, 30000);
  units = split_source(many + wrapper, 3);
  ASSERT_EQ(units.size(), 3u);  // two units of kernels (3 jobs, one for the wrapper), the wrapper
  EXPECT_EQ(units.back(), wrapper);
  // A graph without kernels: its wrapper is the source.
  EXPECT_EQ(split_source(wrapper, 4), std::vector<std::string>{wrapper});
}

TEST_F(BuildTest, ASourceOfManyKernelsIsCompiledAsUnitsAtOnceAndLinked) {
  std::string source = kPrefix + big_kernel("add_f32", 2, 30000) + big_kernel("x3", 3, 30000);
  opts_.jobs = 2;
  BuildResult result = build_shared_library(source, opts_);
  fs::path entry = fs::path(result.so_path).parent_path();
  EXPECT_EQ(files_in(entry.string()),
            (std::vector<std::string>{"kernel.cpp", "kernel.so", "kernel.so.sum", "kernel_0.cpp",
                                      "kernel_1.cpp"}));
  EXPECT_EQ(read_file(result.source_path), source);
  std::shared_ptr<Library> lib = Library::load(result.so_path);
  for (auto [name, k] : {std::pair<const char*, float>{"add_f32", 2}, {"x3", 3}}) {
    auto fn = reinterpret_cast<KernelFn>(lib->symbol(name));
    float a[3] = {1, 2, 3}, out[3] = {};
    void* ptrs[3] = {a, nullptr, out};
    int64_t n = 3;
    fn(ptrs, &n);
    EXPECT_EQ(out[2], 3 * k) << name;
  }
  // A failing unit: the error names it, and no object or temporary file is left.
  opts_.inject_build_failure = true;
  try {
    build_shared_library(source, opts_);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("/kernel_"), std::string::npos) << message;  // the unit's source
    EXPECT_NE(message.find("translation units"), std::string::npos) << message;
    EXPECT_NE(message.find("coil_injected_build_failure"), std::string::npos) << message;
  }
  for (const auto& f : fs::recursive_directory_iterator(opts_.cache_dir)) {
    std::string name = f.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
    EXPECT_NE(f.path().extension(), ".o") << name;
  }
}

}  // namespace
}  // namespace coil::runtime
