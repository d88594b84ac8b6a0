#include "coil/runtime/package.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <string_view>
#include <system_error>

#include "coil/runtime/hash.h"

namespace coil::runtime {
namespace {

constexpr size_t kDigestSize = 32;
// Name size, offset, size and digest: a record's bytes besides its name.
constexpr size_t kRecordFixedSize = 4 + 8 + 8 + kDigestSize;

struct Record {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::string digest;  // kDigestSize raw bytes
};

PackageError error(const std::string& path, const std::string& what) {
  return PackageError("coil: package '" + path + "': " + what);
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

uint64_t align_up(uint64_t offset) {
  return (offset + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment;
}

void put_u32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

// Sha256's hex digest as its kDigestSize raw bytes.
std::string raw_digest(Sha256& hasher) {
  std::string hex = hasher.hex_digest();
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string raw(kDigestSize, '\0');
  for (size_t i = 0; i < kDigestSize; ++i)
    raw[i] = char(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  return raw;
}

std::string raw_digest(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return raw_digest(hasher);
}

// The digest stored in the header: over the header's version, count and directory size, then
// the directory.
std::string directory_digest(const char* header, std::string_view directory) {
  Sha256 hasher;
  hasher.update(header + 8, 16);
  hasher.update(directory);
  return raw_digest(hasher);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // The result of ::close (0, or -1 with errno set); a later call does nothing.
  int close() {
    int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

void write_all(int fd, std::string_view data, const std::string& temp, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw error(path, "could not write '" + temp + "': " + errno_text(errno));
    data.remove_prefix(size_t(n));
  }
}

// Reads exactly `size` bytes at `offset`; false when the file ends first.
bool read_at(int fd, char* out, size_t size, uint64_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw error(path, "read failed: " + errno_text(errno));
    if (n == 0) return false;
    out += n;
    size -= size_t(n);
    offset += uint64_t(n);
  }
  return true;
}

std::string directory_bytes(const std::vector<std::pair<std::string, std::string>>& entries,
                            const std::string& path) {
  std::set<std::string_view> names;
  uint64_t size = 0;
  for (const auto& [name, data] : entries) {
    if (name.empty() || name.find('\0') != std::string::npos || name.size() > UINT32_MAX) {
      throw error(path, "invalid entry name '" + name + "': names are 1 to 2^32-1 bytes, no NUL");
    }
    if (!names.insert(name).second) throw error(path, "entry '" + name + "' is given twice");
    size += kRecordFixedSize + name.size();
  }
  std::string directory;
  directory.reserve(size);
  uint64_t offset = kPackageHeaderSize + size;
  for (const auto& [name, data] : entries) {
    offset = align_up(offset);
    put_u32(&directory, uint32_t(name.size()));
    directory += name;
    put_u64(&directory, offset);
    put_u64(&directory, data.size());
    directory += raw_digest(data);
    offset += data.size();
  }
  return directory;
}

// Parses the directory (already checked against its digest) and checks that the records
// describe the layout of package.h.
std::vector<Record> parse_directory(std::string_view directory, uint32_t count,
                                    const std::string& path) {
  auto malformed = [&](const std::string& what) {
    return error(path, "malformed directory: " + what);
  };
  std::vector<Record> records;
  std::set<std::string> names;
  size_t pos = 0;
  uint64_t end = kPackageHeaderSize + directory.size();
  for (uint32_t i = 0; i < count; ++i) {
    if (directory.size() - pos < 4) throw malformed("record " + std::to_string(i) + " is cut off");
    uint64_t name_size = get_le(directory.data() + pos, 4);
    if (directory.size() - pos - 4 < name_size + kRecordFixedSize - 4) {
      throw malformed("record " + std::to_string(i) + " is cut off");
    }
    Record r;
    r.name.assign(directory.data() + pos + 4, name_size);
    const char* p = directory.data() + pos + 4 + name_size;
    r.offset = get_le(p, 8);
    r.size = get_le(p + 8, 8);
    r.digest.assign(p + 16, kDigestSize);
    pos += kRecordFixedSize + name_size;
    if (r.name.empty() || r.name.find('\0') != std::string::npos || !names.insert(r.name).second) {
      throw malformed("record " + std::to_string(i) + " has an empty, invalid or repeated name");
    }
    if (r.offset != align_up(end) || r.size > UINT64_MAX - r.offset) {
      throw malformed("entry '" + r.name + "' is not where the layout puts it");
    }
    end = r.offset + r.size;
    records.push_back(std::move(r));
  }
  if (pos != directory.size())
    throw malformed("bytes left over after " + std::to_string(count) + " records");
  return records;
}

}  // namespace

void write_package(const std::string& path,
                   const std::vector<std::pair<std::string, std::string>>& entries) {
  if (entries.size() > UINT32_MAX) throw error(path, "too many entries");
  const std::string directory = directory_bytes(entries, path);
  std::string header(kPackageMagic, sizeof(kPackageMagic));
  put_u32(&header, kPackageFormatVersion);
  put_u32(&header, uint32_t(entries.size()));
  put_u64(&header, directory.size());
  header += directory_digest(header.data(), directory);

  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0) throw error(path, "could not create '" + temp + "': " + errno_text(errno));
  try {
    write_all(fd.get(), header, temp, path);
    write_all(fd.get(), directory, temp, path);
    static const char kZeros[kPackageAlignment] = {};
    uint64_t offset = kPackageHeaderSize + directory.size();
    for (const auto& [name, data] : entries) {
      write_all(fd.get(), std::string_view(kZeros, align_up(offset) - offset), temp, path);
      write_all(fd.get(), data, temp, path);
      offset = align_up(offset) + data.size();
    }
    if (::fsync(fd.get()) != 0 || fd.close() != 0) {
      throw error(path, "could not write '" + temp + "': " + errno_text(errno));
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      throw error(path, "could not rename '" + temp + "' over it: " + errno_text(errno));
    }
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
}

std::map<std::string, std::string> read_package(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw error(path, "cannot open it: " + errno_text(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw error(path, "cannot stat it: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw error(path, "not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  auto truncated = [&](const std::string& what) {
    return error(path, "truncated: " + what + ", the file has " + std::to_string(file_size) +
                           " bytes. Write the package again.");
  };

  char header[kPackageHeaderSize];
  const size_t header_bytes = size_t(std::min<uint64_t>(file_size, kPackageHeaderSize));
  if (!read_at(fd.get(), header, header_bytes, 0, path)) throw truncated("it shrank while read");
  if (std::memcmp(header, kPackageMagic, std::min(header_bytes, sizeof(kPackageMagic))) != 0) {
    throw error(path, "not a coil package (it does not start with coil's package magic)");
  }
  if (file_size < kPackageHeaderSize) {
    throw truncated("the header needs " + std::to_string(kPackageHeaderSize) + " bytes");
  }
  const uint64_t version = get_le(header + 8, 4);
  if (version != kPackageFormatVersion) {
    throw error(path, "format version " + std::to_string(version) + ", this coil reads " +
                          std::to_string(kPackageFormatVersion) +
                          ". Write the package with this coil's version.");
  }
  const uint32_t count = uint32_t(get_le(header + 12, 4));
  const uint64_t directory_size = get_le(header + 16, 8);
  if (directory_size > file_size - kPackageHeaderSize) {
    throw truncated("the directory ends at byte " +
                    std::to_string(kPackageHeaderSize + directory_size));
  }
  std::string directory(directory_size, '\0');
  if (!read_at(fd.get(), directory.data(), directory.size(), kPackageHeaderSize, path)) {
    throw truncated("it shrank while read");
  }
  if (directory_digest(header, directory) != std::string_view(header + 24, kDigestSize)) {
    throw error(path, "the directory is corrupt (checksum mismatch)");
  }
  const std::vector<Record> records = parse_directory(directory, count, path);

  uint64_t end = kPackageHeaderSize + directory_size;
  if (!records.empty()) end = records.back().offset + records.back().size;
  for (const Record& r : records) {
    if (r.offset + r.size > file_size) {
      throw truncated("entry '" + r.name + "' needs bytes [" + std::to_string(r.offset) + ", " +
                      std::to_string(r.offset + r.size) + ")");
    }
  }
  if (file_size > end) {
    throw error(path, std::to_string(file_size - end) + " unexpected bytes after the last entry");
  }

  std::map<std::string, std::string> entries;
  uint64_t pos = kPackageHeaderSize + directory_size;
  for (const Record& r : records) {
    char gap[kPackageAlignment];
    const size_t gap_size = size_t(r.offset - pos);
    std::string data(r.size, '\0');
    if (!read_at(fd.get(), gap, gap_size, pos, path) ||
        !read_at(fd.get(), data.data(), data.size(), r.offset, path)) {
      throw truncated("it shrank while read");
    }
    if (std::any_of(gap, gap + gap_size, [](char c) { return c != 0; })) {
      throw error(path, "the padding before entry '" + r.name + "' is corrupt (not zero)");
    }
    if (raw_digest(data) != r.digest) {
      throw error(path, "entry '" + r.name + "' is corrupt (checksum mismatch)");
    }
    pos = r.offset + r.size;
    entries.emplace(r.name, std::move(data));
  }
  return entries;
}

}  // namespace coil::runtime
