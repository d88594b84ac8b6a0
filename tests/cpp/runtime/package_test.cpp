// Tests for runtime/package.h: round trips, and every kind of damage refused with a message that
// says what is wrong (truncation, a flipped byte in an entry, the directory, the padding or the
// magic, another format version, trailing bytes, a missing file).
#include "coil/runtime/package.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace coil::runtime {
namespace {

namespace fs = std::filesystem;

using Entries = std::vector<std::pair<std::string, std::string>>;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/coil_package_test.XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
    path_ = root_ + "/model.coil";
  }
  void TearDown() override { fs::remove_all(root_); }

  // The message read_package throws for the file holding `bytes` ("" when it throws none).
  std::string read_error(const std::string& bytes) {
    write_file(path_, bytes);
    try {
      read_package(path_);
    } catch (const PackageError& e) {
      return e.what();
    }
    return "";
  }

  // A package of two entries; the offset of each entry's bytes in it.
  std::string sample(size_t* first_entry, size_t* second_entry) {
    write_package(path_, {{"metadata.json", "{\"format\": 1}"},
                          {"graph.so",
                           "\x7f"
                           "ELF..."}});
    std::string bytes = read_file(path_);
    *first_entry = bytes.find("{\"format\"");
    *second_entry = bytes.find(
        "\x7f"
        "ELF");
    return bytes;
  }

  std::string root_;
  std::string path_;
};

TEST_F(PackageTest, RoundTrip) {
  std::string binary;
  for (int i = 0; i < 1000; ++i) binary.push_back(char(i % 7 == 0 ? 0 : i * 31));
  std::string large(5 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = char((i * 2654435761u) >> 13);
  Entries entries = {{"metadata.json", "{}"},
                     {"empty", ""},
                     {"weights/0", binary},
                     {"graph.so", large},
                     {"a", "x"}};
  write_package(path_, entries);
  std::map<std::string, std::string> read = read_package(path_);
  ASSERT_EQ(read.size(), entries.size());
  for (const auto& [name, data] : entries) EXPECT_EQ(read.at(name), data) << name;
}

TEST_F(PackageTest, NoEntries) {
  write_package(path_, {});
  EXPECT_EQ(read_file(path_).size(), kPackageHeaderSize);
  EXPECT_TRUE(read_package(path_).empty());
}

TEST_F(PackageTest, LayoutIsAsDocumented) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  EXPECT_EQ(bytes.substr(0, 8), std::string("COILPKG\0", 8));
  EXPECT_EQ(bytes[8], 1);   // format version
  EXPECT_EQ(bytes[12], 2);  // entries
  EXPECT_EQ(first % kPackageAlignment, 0u);
  EXPECT_EQ(second % kPackageAlignment, 0u);
  EXPECT_EQ(bytes.size(), second + 7);
}

TEST_F(PackageTest, OverwritesAtomicallyAndLeavesNoTemporaryFile) {
  write_package(path_, {{"a", "old"}});
  write_package(path_, {{"a", "new"}});
  EXPECT_EQ(read_package(path_).at("a"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(PackageTest, RefusesBadNames) {
  EXPECT_THROW(write_package(path_, {{"a", "1"}, {"a", "2"}}), PackageError);
  EXPECT_THROW(write_package(path_, {{"", "1"}}), PackageError);
  EXPECT_THROW(write_package(path_, {{std::string("a\0b", 3), "1"}}), PackageError);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(PackageTest, TruncatedAnywhere) {
  size_t first = 0, second = 0;
  const std::string bytes = sample(&first, &second);
  for (size_t size : {size_t(0), size_t(5), size_t(8), size_t(30), kPackageHeaderSize,
                      kPackageHeaderSize + 10, first, first + 3, second, bytes.size() - 1}) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " bytes");
    std::string message = read_error(bytes.substr(0, size));
    EXPECT_NE(message.find("coil: package '" + path_ + "': truncated: "), std::string::npos)
        << message;
  }
  std::string message = read_error(bytes.substr(0, second + 3));
  EXPECT_NE(message.find("entry 'graph.so' needs bytes"), std::string::npos) << message;
}

TEST_F(PackageTest, FlippedByteInAnEntry) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  bytes[second + 2] ^= 0x10;
  EXPECT_NE(read_error(bytes).find("entry 'graph.so' is corrupt (checksum mismatch)"),
            std::string::npos);
}

TEST_F(PackageTest, FlippedByteInTheDirectoryOrHeader) {
  size_t first = 0, second = 0;
  const std::string bytes = sample(&first, &second);
  // Entry count, directory size, the digest itself, a name, an offset.
  for (size_t at :
       {size_t(12), size_t(17), size_t(40), kPackageHeaderSize + 5, kPackageHeaderSize + 20}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    std::string damaged = bytes;
    damaged[at] ^= 0x01;
    std::string message = read_error(damaged);
    EXPECT_TRUE(message.find("the directory is corrupt (checksum mismatch)") != std::string::npos ||
                message.find("truncated") != std::string::npos)
        << message;
  }
}

TEST_F(PackageTest, FlippedByteInThePadding) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  bytes[second - 1] = 'x';
  EXPECT_NE(read_error(bytes).find("the padding before entry 'graph.so' is corrupt"),
            std::string::npos);
}

TEST_F(PackageTest, BadMagic) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  bytes[1] = 'X';
  EXPECT_NE(read_error(bytes).find("not a coil package"), std::string::npos);
  EXPECT_NE(read_error("PK\x03\x04 a zip file, say").find("not a coil package"), std::string::npos);
}

TEST_F(PackageTest, AnotherFormatVersion) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  bytes[8] = 2;
  EXPECT_NE(read_error(bytes).find("format version 2, this coil reads 1"), std::string::npos);
}

TEST_F(PackageTest, TrailingBytes) {
  size_t first = 0, second = 0;
  std::string bytes = sample(&first, &second);
  EXPECT_NE(read_error(bytes + "abc").find("3 unexpected bytes after the last entry"),
            std::string::npos);
}

TEST_F(PackageTest, MissingFile) {
  try {
    read_package(root_ + "/absent.coil");
    FAIL() << "expected PackageError";
  } catch (const PackageError& e) {
    EXPECT_STREQ(e.what(), ("coil: package '" + root_ +
                            "/absent.coil': cannot open it: No such file or directory")
                               .c_str());
  }
}

TEST_F(PackageTest, UnwritableFolder) {
  EXPECT_THROW(write_package(root_ + "/no/such/folder/model.coil", {{"a", "1"}}), PackageError);
}

}  // namespace
}  // namespace coil::runtime
