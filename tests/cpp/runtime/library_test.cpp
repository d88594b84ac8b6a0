// Tests for runtime/library.h: one Library per file, symbol lookup and its errors.
#include "coil/runtime/library.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "coil/runtime/build.h"

namespace coil::runtime {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSource = R"(
#include <cstdint>
extern "C" void fill_i64(void* const* ptrs, const int64_t* ints) {
  static_cast<int64_t*>(ptrs[0])[0] = ints[0];
}
)";

class LibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/coil_library_test.XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
    BuildOptions opts;
    opts.cache_dir = root_ + "/cache";
    opts.flags = {"-O1", "-std=c++17", "-shared", "-fPIC"};
    so_path_ = build_shared_library(kSource, opts).so_path;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
  std::string so_path_;
};

TEST_F(LibraryTest, LoadsAndCallsASymbol) {
  auto library = Library::load(so_path_);
  auto fill = reinterpret_cast<void (*)(void* const*, const int64_t*)>(library->symbol("fill_i64"));
  int64_t out = 0;
  void* ptrs[] = {&out};
  int64_t ints[] = {42};
  fill(ptrs, ints);
  EXPECT_EQ(out, 42);
}

TEST_F(LibraryTest, SameFileGivesSameLibraryWhileAlive) {
  auto first = Library::load(so_path_);
  // A different spelling of the same file still finds the loaded library.
  fs::path entry = fs::path(so_path_).parent_path();
  auto second = Library::load((entry / "." / "kernel.so").string());
  EXPECT_EQ(first.get(), second.get());
  first.reset();
  second.reset();
  auto third = Library::load(so_path_);
  EXPECT_NE(third->symbol("fill_i64"), nullptr);
}

TEST_F(LibraryTest, MissingSymbolThrowsWithItsName) {
  auto library = Library::load(so_path_);
  try {
    library->symbol("no_such_kernel");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("no_such_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find(library->path()), std::string::npos) << message;
  }
}

TEST_F(LibraryTest, MissingFileThrows) {
  EXPECT_THROW(Library::load(root_ + "/missing.so"), std::runtime_error);
}

TEST_F(LibraryTest, FileThatIsNotALibraryThrowsWithLoaderMessage) {
  std::string bogus = root_ + "/bogus.so";
  fs::copy_file(fs::path(so_path_).parent_path() / "kernel.cpp", bogus);
  try {
    Library::load(bogus);
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dlopen failed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coil::runtime
