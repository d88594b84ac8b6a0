#include "coil/runtime/build.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "coil/runtime/hash.h"

extern char** environ;

namespace coil::runtime {

// -fno-tree-loop-if-convert: GCC 12's vectorizer (-O3 -mavx2) miscompiles conditional loads that
// form an interleaved group: `out[2*i] = i < 13 ? in[2*i] : in[2*i - 26]; out[2*i + 1] = ...`
// (a cat along dim 0 of rows of 2, its short loop unrolled) left lanes 13-15 zero (fuzzer seed
// 7182). Scalar loops with conditional loads then stay scalar; coil's own vector loops do not
// depend on it. The perf fuzzer's cat/pad programs measured the same within noise.
std::vector<std::string> default_kernel_flags() {
  std::vector<std::string> flags = {"-O3",
                                    "-march=native",
                                    "-fopenmp",
                                    "-std=c++17",
                                    "-shared",
                                    "-fPIC",
                                    "-fno-strict-aliasing",
                                    "-ffp-contract=off",
                                    "-fno-math-errno",
                                    "-fno-tree-loop-if-convert"};
  return flags;
}

namespace {

// Enough for the first errors of a failed compilation; the whole output stays in build.log.
constexpr size_t kMaxCompilerOutputInMessage = 4000;

// Appended by BuildOptions::inject_build_failure: a call with an unbalanced parenthesis.
constexpr std::string_view kInjectedFailure =
    "\n// Appended by BuildOptions::inject_build_failure.\n"
    "coil_injected_build_failure(;\n";

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string octal_mode(mode_t mode) {
  std::string out = "0";
  for (int shift = 6; shift >= 0; shift -= 3) out.push_back(char('0' + ((mode >> shift) & 7)));
  return out;
}

// A name next to `final_path` that no other thread or process uses: temporary files are written
// there and renamed over `final_path`, so that readers see the old file or the new one, never
// a partial one.
std::string temp_path_for(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  return final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

// Removes the file on scope exit (success or exception) unless release()d.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// Closes the descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

void write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw BuildError("coil: could not write '" + path + "': " + errno_text(errno) +
                       ". Check that the cache directory's file system is writable and not full.");
    }
    data.remove_prefix(size_t(n));
  }
}

// Reads the whole file into *out; false when it cannot be opened or read.
bool read_whole_file(const std::string& path, std::string* out) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return false;
  out->clear();
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(chunk, size_t(n));
  }
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return;
  throw BuildError("coil: could not rename '" + from + "' to '" + to + "': " + errno_text(errno) +
                   ". Check that the cache directory is writable.");
}

void write_file_atomically(const std::string& path, std::string_view content) {
  TempFile temp(temp_path_for(path));
  Fd fd(::open(temp.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    throw BuildError("coil: could not create '" + temp.path() + "': " + errno_text(errno) +
                     ". Check that the cache directory is writable.");
  }
  write_all(fd.get(), content, temp.path());
  fd.reset();
  rename_or_throw(temp.path(), path);
  temp.release();
}

// Creates one directory with mode 0700 unless it already exists.
void make_private_dir(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return;
  if (::mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST) return;  // another thread or process was faster
    throw BuildError("coil: could not create the cache directory '" + path + "': " +
                     errno_text(errno) + ". Choose a cache_dir where you can create directories.");
  }
  // mkdir's mode is filtered by the umask; make sure the owner can write.
  ::chmod(path.c_str(), 0700);
}

// Creates `path` and its missing parents, each with mode 0700.
void make_private_dirs(const std::string& path) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string prefix = path.substr(0, pos);
    if (!prefix.empty() && prefix.back() != '/') make_private_dir(prefix);
  }
}

// coil loads and runs code from the cache, so anyone who can write there can run code as the
// user: the directory must belong to the user and be closed to writes by anybody else.
void check_private_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    throw BuildError("coil: cannot use the cache directory '" + dir + "': " + errno_text(errno) +
                     ". Choose a cache_dir you can create and write.");
  }
  if (!S_ISDIR(st.st_mode)) {
    throw BuildError("coil: the cache directory '" + dir +
                     "' exists but is not a directory. Remove it or choose another cache_dir.");
  }
  if (st.st_uid != ::geteuid()) {
    throw BuildError("coil: the cache directory '" + dir + "' is owned by uid " +
                     std::to_string(st.st_uid) + ", not by the current user (uid " +
                     std::to_string(::geteuid()) +
                     "). coil loads compiled code from it, so it must be private to you. Choose "
                     "another cache_dir (for example one under your home directory).");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw BuildError("coil: the cache directory '" + dir + "' has mode " +
                     octal_mode(st.st_mode & 0777) +
                     ", which lets other users write to it. coil loads compiled code from it, "
                     "so it must not be group- or other-writable. Run `chmod go-w '" +
                     dir + "'` or choose another cache_dir.");
  }
}

// Starts argv (argv[0] is looked up on PATH; no shell) with stdin from /dev/null and both
// stdout and stderr going to out_fd. Returns the child's pid.
pid_t spawn_program(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);
  pid_t pid = 0;
  int err = ::posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    throw BuildError("coil: could not run the C++ compiler '" + argv[0] + "': " + errno_text(err) +
                     ". Expected a compiler on PATH or a path to one; set BuildOptions::compiler.");
  }
  return pid;
}

// Waits for the child; returns its wait status.
int wait_program(pid_t pid, const std::string& program) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    throw BuildError("coil: could not wait for '" + program + "': " + errno_text(errno) +
                     ". Is SIGCHLD ignored in this process?");
  }
  return status;
}

bool succeeded(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

// The first line of `<compiler> --version`, run once per compiler per process.
std::string compiler_version(const std::string& compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = versions.find(compiler); it != versions.end()) return it->second;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw BuildError("coil: could not create a pipe to run '" + compiler +
                     " --version': " + errno_text(errno) + ".");
  }
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);
  pid_t pid = spawn_program({compiler, "--version"}, write_end.get());
  write_end.reset();  // so that the read below ends when the child exits
  std::string output;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(read_end.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(chunk, size_t(n));
  }
  int status = wait_program(pid, compiler);
  if (!succeeded(status)) {
    throw BuildError("coil: `" + compiler + " --version` " + describe_status(status) +
                     "; its output was:\n" + output.substr(0, kMaxCompilerOutputInMessage) +
                     "\ncoil keys its build cache on that line. Expected a working C++ compiler; "
                     "set BuildOptions::compiler.");
  }
  std::string first_line = output.substr(0, output.find('\n'));
  versions.emplace(compiler, first_line);
  return first_line;
}

std::string cache_key(std::string_view source, const BuildOptions& opts, std::string_view version) {
  Sha256 hasher;
  // Each field is length-prefixed so that no two different inputs hash the same text.
  auto field = [&hasher](std::string_view text) {
    hasher.update(std::to_string(text.size()));
    hasher.update(":");
    hasher.update(text);
  };
  hasher.update("coil.runtime.build_shared_library v1\n");
  field(source);
  if (!opts.precompiled_header.empty()) field("pch:" + opts.precompiled_header);
  field(opts.compiler);
  field(std::to_string(opts.flags.size()));
  for (const std::string& flag : opts.flags) field(flag);
  field(version);
  return hasher.hex_digest();
}

// The .sum text of a file: its size and SHA-256. Empty when the file cannot be read.
std::string file_summary(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return "";
  Sha256 hasher;
  uint64_t size = 0;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "";
    if (n == 0) break;
    hasher.update(chunk, size_t(n));
    size += uint64_t(n);
  }
  return "size " + std::to_string(size) + "\nsha256 " + hasher.hex_digest() + "\n";
}

// A hit needs the library to match its recorded size and hash; anything else (missing files,
// a truncated or overwritten library, a garbage .sum) is a miss and gets rebuilt.
bool is_intact(const std::string& so_path, const std::string& sum_path) {
  std::string recorded;
  if (!read_whole_file(sum_path, &recorded)) return false;
  struct stat st;
  if (::stat(so_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // Compare sizes first so that a truncated library is rejected without hashing it.
  std::string size_line = "size " + std::to_string(st.st_size) + "\n";
  if (recorded.compare(0, size_line.size(), size_line) != 0) return false;
  return file_summary(so_path) == recorded;
}

std::string render_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    out += plain ? arg : "'" + arg + "'";
  }
  return out;
}

std::string trim_output(const std::string& output, const std::string& log_path) {
  if (output.empty()) return "(the compiler printed nothing)\n";
  if (output.size() <= kMaxCompilerOutputInMessage) return output;
  std::string head = output.substr(0, kMaxCompilerOutputInMessage);
  if (size_t last_newline = head.rfind('\n'); last_newline != std::string::npos) {
    head.resize(last_newline + 1);
  }
  return head + "[... " + std::to_string(output.size() - head.size()) +
         " more bytes; the full output is in " + log_path + "]\n";
}

// Flags that only matter when linking: left out of a precompiled header's command line.
bool is_link_flag(const std::string& flag) {
  return flag == "-shared" || flag.rfind("-l", 0) == 0 || flag.rfind("-L", 0) == 0 ||
         flag.rfind("-Wl,", 0) == 0 || flag.rfind("-fuse-ld=", 0) == 0;
}

// The header opts.precompiled_header, precompiled in the cache (see build.h); returns the path
// sources include it by. Precompiling is best effort: on failure the header is still there, and
// compilers read it as text.
std::string precompiled_header(const BuildOptions& opts, const std::string& cache_dir,
                               const std::string& version) {
  std::vector<std::string> flags;
  for (const std::string& f : opts.flags) {
    if (!is_link_flag(f)) flags.push_back(f);
  }
  BuildOptions key_opts = opts;
  key_opts.flags = flags;
  const std::string key =
      cache_key("precompiled header\n" + opts.precompiled_header, key_opts, version);
  const std::string dir = cache_dir + "/pch";
  const std::string entry = dir + "/" + key;
  make_private_dir(dir);
  make_private_dir(entry);
  const std::string header = entry + "/coil_pch.h";
  const std::string gch = header + ".gch";
  const std::string sum = gch + ".sum";
  // A .gch is about 100 MB: checked (or precompiled, or found not to precompile) once per
  // process, not once per build.
  static std::mutex mutex;
  static std::set<std::string> checked;
  std::lock_guard<std::mutex> lock(mutex);
  if (!checked.insert(gch).second) return header;
  struct stat st;
  if (::stat(header.c_str(), &st) != 0) write_file_atomically(header, opts.precompiled_header);
  if (is_intact(gch, sum)) return header;
  TempFile temp(temp_path_for(gch));
  std::vector<std::string> argv = {opts.compiler, "-x", "c++-header", header};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("-o");
  argv.push_back(temp.path());
  Fd log(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (log.get() < 0) return header;
  if (!succeeded(wait_program(spawn_program(argv, log.get()), opts.compiler))) return header;
  std::string summary = file_summary(temp.path());
  if (summary.empty()) return header;
  rename_or_throw(temp.path(), gch);
  temp.release();
  write_file_atomically(sum, summary);
  return header;
}

// Runs argv with its output to log_path (kept when not empty; written through a temporary
// file); returns the wait status and the output.
int run_logged(const std::vector<std::string>& argv, const std::string& program,
               const std::string& log_path, std::string* output) {
  TempFile log(temp_path_for(log_path));
  Fd log_fd(::open(log.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (log_fd.get() < 0) {
    throw BuildError("coil: could not create '" + log.path() + "': " + errno_text(errno) +
                     ". Check that the cache directory is writable.");
  }
  int status = wait_program(spawn_program(argv, log_fd.get()), program);
  log_fd.reset();
  read_whole_file(log.path(), output);
  if (!output->empty() && ::rename(log.path().c_str(), log_path.c_str()) == 0) log.release();
  return status;
}

// Compiles source_path into out_path. The compiler's output goes to <entry_dir>/build.log
// (kept when it is not empty); a failure throws BuildError carrying that output.
void compile(const BuildOptions& opts, const std::string& entry_dir, const std::string& source_path,
             const std::string& out_path, const std::string& pch_header) {
  std::vector<std::string> argv = {opts.compiler, source_path};
  if (!pch_header.empty()) {
    argv.push_back("-include");
    argv.push_back(pch_header);
  }
  argv.insert(argv.end(), opts.flags.begin(), opts.flags.end());
  argv.push_back("-o");
  argv.push_back(out_path);

  const std::string log_path = entry_dir + "/build.log";
  std::string output;
  int status = run_logged(argv, opts.compiler, log_path, &output);
  if (succeeded(status)) return;
  throw BuildError("coil: the C++ compiler failed on a generated kernel (" + opts.compiler + " " +
                   describe_status(status) + ").\n  source:  " + source_path +
                   "\n  command: " + render_command(argv) + "\n  log:     " + log_path +
                   "\ncompiler output:\n" + trim_output(output, log_path) +
                   "This is most likely a bug in coil's code generation: please report it with "
                   "the source file above. If the compiler or its flags are the problem, change "
                   "BuildOptions::compiler or BuildOptions::flags.");
}

// Compiles the translation units into objects at once (one compiler each), then links them
// into out_path. Each unit's output goes to <entry_dir>/build_<i>.log; the first failure throws
// BuildError carrying its output, after every compiler has finished.
void compile_units(const BuildOptions& opts, const std::string& entry_dir,
                   const std::vector<std::string>& units, const std::string& out_path,
                   const std::string& pch_header) {
  struct Unit {
    std::string source, object, log;
    std::vector<std::string> argv;
    pid_t pid = -1;
    std::unique_ptr<TempFile> log_file, object_file;
  };
  std::vector<Unit> parts(units.size());
  for (size_t i = 0; i < units.size(); ++i) {
    Unit& u = parts[i];
    u.source = entry_dir + "/kernel_" + std::to_string(i) + ".cpp";
    u.object = entry_dir + "/kernel_" + std::to_string(i) + ".o";
    u.log = entry_dir + "/build_" + std::to_string(i) + ".log";
    write_file_atomically(u.source, units[i]);
    u.object_file = std::make_unique<TempFile>(temp_path_for(u.object));
    u.argv = {opts.compiler, "-c", u.source};
    // The wrapper's unit includes only coil's ATen shim: no precompiled header.
    const std::string pch = units[i].find(kWrapperBoundary) != std::string::npos ? "" : pch_header;
    if (!pch.empty()) {
      u.argv.push_back("-include");
      u.argv.push_back(pch);
    }
    for (const std::string& f : opts.flags)
      if (!is_link_flag(f)) u.argv.push_back(f);
    u.argv.push_back("-o");
    u.argv.push_back(u.object_file->path());
  }
  // Started together, then waited for together: the wall time of the largest unit.
  for (Unit& u : parts) {
    u.log_file = std::make_unique<TempFile>(temp_path_for(u.log));
    Fd fd(::open(u.log_file->path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
      for (Unit& started : parts)
        if (started.pid > 0) wait_program(started.pid, opts.compiler);
      throw BuildError("coil: could not create '" + u.log_file->path() + "': " + errno_text(errno) +
                       ". Check that the cache directory is writable.");
    }
    u.pid = spawn_program(u.argv, fd.get());
  }
  std::string failure;
  for (Unit& u : parts) {
    int status = wait_program(u.pid, opts.compiler);
    std::string output;
    read_whole_file(u.log_file->path(), &output);
    if (!output.empty() && ::rename(u.log_file->path().c_str(), u.log.c_str()) == 0)
      u.log_file->release();
    if (succeeded(status) || !failure.empty()) continue;
    failure = "coil: the C++ compiler failed on a generated kernel (" + opts.compiler + " " +
              describe_status(status) + ").\n  source:  " + u.source +
              "\n  (one of the translation units kernel.cpp was compiled as)\n  command: " +
              render_command(u.argv) + "\n  log:     " + u.log + "\ncompiler output:\n" +
              trim_output(output, u.log) +
              "This is most likely a bug in coil's code generation: please report it with "
              "the source file above. If the compiler or its flags are the problem, change "
              "BuildOptions::compiler or BuildOptions::flags.";
  }
  if (!failure.empty()) throw BuildError(failure);
  std::vector<std::string> link = {opts.compiler};
  for (const Unit& u : parts) link.push_back(u.object_file->path());
  link.insert(link.end(), opts.flags.begin(), opts.flags.end());
  link.push_back("-o");
  link.push_back(out_path);
  const std::string log_path = entry_dir + "/build.log";
  std::string output;
  int status = run_logged(link, opts.compiler, log_path, &output);
  if (!succeeded(status)) {
    throw BuildError("coil: linking the kernels' objects failed (" + opts.compiler + " " +
                     describe_status(status) + ").\n  command: " + render_command(link) +
                     "\n  log:     " + log_path + "\ncompiler output:\n" +
                     trim_output(output, log_path));
  }
  // The objects are only needed for the link (the temporary files remove them).
}

// COIL_BUILD_JOBS when set (1: one compiler per source), else the hardware threads, at most 8.
int default_jobs() {
  if (const char* env = std::getenv("COIL_BUILD_JOBS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

}  // namespace

std::vector<std::string> split_source(const std::string& source, int jobs) {
  const std::string wrapper_line = kWrapperBoundary;
  size_t wrapper = source.rfind(wrapper_line);
  if (wrapper != std::string::npos && (wrapper == 0 || source[wrapper - 1] == '\n')) {
    std::string head = source.substr(0, wrapper);
    size_t first_kernel = head.find(kKernelBoundary);
    if (first_kernel == std::string::npos) return {source};  // no kernels: the wrapper alone
    std::vector<std::string> out = split_source(head, jobs - 1);
    out.push_back(source.substr(wrapper));  // (self-contained: it needs none of the prelude)
    return out;
  }
  constexpr size_t kMinUnitBytes = 24 * 1024;
  const std::string boundary = kKernelBoundary;
  std::vector<size_t> starts;
  for (size_t at = source.find(boundary); at != std::string::npos;
       at = source.find(boundary, at + boundary.size())) {
    if (at == 0 || source[at - 1] == '\n') starts.push_back(at);
  }
  if (starts.size() < 2 || jobs < 2) return {source};
  const std::string prefix = source.substr(0, starts[0]);
  std::vector<std::string> kernels;
  size_t kernel_bytes = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1] : source.size();
    kernels.push_back(source.substr(starts[i], end - starts[i]));
    kernel_bytes += kernels.back().size();
  }
  size_t units =
      std::min({static_cast<size_t>(jobs), kernels.size(), kernel_bytes / kMinUnitBytes});
  if (units < 2) return {source};
  // Largest first into the lightest unit; each unit's kernels then in source order.
  std::vector<size_t> order(kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kernels[a].size() > kernels[b].size(); });
  std::vector<std::vector<size_t>> groups(units);
  std::vector<size_t> bytes(units, 0);
  for (size_t k : order) {
    size_t lightest = std::min_element(bytes.begin(), bytes.end()) - bytes.begin();
    groups[lightest].push_back(k);
    bytes[lightest] += kernels[k].size();
  }
  std::vector<std::string> out;
  for (std::vector<size_t>& g : groups) {
    std::sort(g.begin(), g.end());
    std::string unit = prefix;
    for (size_t k : g) unit += kernels[k];
    out.push_back(std::move(unit));
  }
  return out;
}

BuildResult build_shared_library(const std::string& source, const BuildOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  if (opts.cache_dir.empty()) {
    throw BuildError(
        "coil: BuildOptions::cache_dir is empty. Set it to a private directory for compiled "
        "kernels (for example ~/.cache/coil); it is created if missing.");
  }
  if (opts.compiler.empty()) {
    throw BuildError("coil: BuildOptions::compiler is empty. Set it to a C++ compiler, e.g. g++.");
  }
  // Absolute paths, so that the results do not depend on the working directory (dlopen treats
  // a name without a slash as a library to search for).
  std::string cache_dir = std::filesystem::absolute(opts.cache_dir).lexically_normal();
  if (cache_dir.size() > 1 && cache_dir.back() == '/') cache_dir.pop_back();
  make_private_dirs(cache_dir);
  check_private_dir(cache_dir);

  std::string effective_source = source;
  if (opts.inject_build_failure) effective_source += kInjectedFailure;
  const std::string version = compiler_version(opts.compiler);
  const std::string key = cache_key(effective_source, opts, version);
  const std::string shard_dir = cache_dir + "/" + key.substr(0, 2);
  const std::string entry_dir = shard_dir + "/" + key;
  make_private_dir(shard_dir);
  make_private_dir(entry_dir);

  BuildResult result;
  result.source_path = entry_dir + "/kernel.cpp";
  result.so_path = entry_dir + "/kernel.so";
  const std::string sum_path = result.so_path + ".sum";
  auto seconds_since_start = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  if (is_intact(result.so_path, sum_path)) {
    struct stat st;
    if (::stat(result.source_path.c_str(), &st) != 0) {
      write_file_atomically(result.source_path, effective_source);
    }
    result.cache_hit = true;
    result.seconds = seconds_since_start();
    return result;
  }

  write_file_atomically(result.source_path, effective_source);
  std::string pch =
      opts.precompiled_header.empty() ? "" : precompiled_header(opts, cache_dir, version);
  TempFile so_temp(temp_path_for(result.so_path));
  std::vector<std::string> units =
      split_source(effective_source, opts.jobs > 0 ? opts.jobs : default_jobs());
  if (units.size() > 1) {
    compile_units(opts, entry_dir, units, so_temp.path(), pch);
  } else {
    bool wrapper_only = effective_source.find(kWrapperBoundary) != std::string::npos;
    compile(opts, entry_dir, result.source_path, so_temp.path(), wrapper_only ? "" : pch);
  }
  std::string summary = file_summary(so_temp.path());
  if (summary.empty()) {
    throw BuildError("coil: the C++ compiler reported success but did not write '" +
                     so_temp.path() + "' (source: " + result.source_path +
                     "). Expected BuildOptions::flags to produce a shared library (-shared).");
  }
  // The library first, then its .sum: a reader that sees the new .sum also sees the library.
  rename_or_throw(so_temp.path(), result.so_path);
  so_temp.release();
  write_file_atomically(sum_path, summary);
  result.cache_hit = false;
  result.seconds = seconds_since_start();
  return result;
}

}  // namespace coil::runtime
