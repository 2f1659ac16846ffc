#include "rt/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "rt/cpu_info.h"
#include "rt/disk_cache.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/file.h"
#include "rt/hash.h"

extern char** environ;

namespace fs = std::filesystem;

namespace rt {
namespace {

constexpr int kMaxErrorLines = 60;  // of compiler output in an error message

std::atomic<int64_t> g_compile_count{0};

std::optional<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return ::access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
  std::istringstream path(env_string("PATH", "/usr/local/bin:/usr/bin:/bin"));
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string find_compiler() {
  // TL_CXX: the C++ compiler of the CPU backend, a name on PATH or a path (default: c++, g++, clang++).
  const std::string chosen = env_string("TL_CXX", "");
  if (!chosen.empty()) {
    const std::optional<std::string> found = find_program(chosen);
    RT_USER_CHECK(found.has_value(), "TL_CXX=", chosen, " is not an executable (nor a program on PATH)");
    return *found;
  }
  for (const char* name : {"c++", "g++", "clang++"})
    if (std::optional<std::string> found = find_program(name)) return *found;
  throw_user_error("no C++ compiler found for the CPU backend; install g++ or set TL_CXX");
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// For logs and error messages: the command as a shell would need it.
std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "_-+=/.,:@%") == std::string::npos) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// Runs argv[0] (a path) with stdout and stderr going to `log_path`; returns its exit status, or
// 128 + the signal that killed it.
int run_process(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The compiler runs in the C locale, so its messages (which we quote to users) read the same everywhere.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LC_ALL=", 7) != 0 && std::strncmp(*e, "LANG=", 5) != 0 && std::strncmp(*e, "LANGUAGE=", 9) != 0) env_strings.push_back(*e);
  env_strings.push_back("LC_ALL=C");
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  RT_USER_CHECK(rc == 0, "cannot run the C++ compiler ", argv[0], ": ", std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) RT_ICHECK(errno == EINTR, "waitpid: ", std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}


// The compiler's `--version`, once per compiler per process (it is part of every cache key).
const std::string& compiler_version(const std::string& cxx) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard lock(mutex);
  auto it = versions.find(cxx);
  if (it != versions.end()) return it->second;
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);
  const std::string log = unique_temp_path((ec ? fs::path("/tmp") : temp).string() + "/tl-cxx-version");
  const int status = run_process({cxx, "--version"}, log);
  std::string output = read_file(log).value_or("");
  ::unlink(log.c_str());
  RT_USER_CHECK(status == 0, "the C++ compiler ", cxx, " --version failed (exit code ", status, "): ", output);
  return versions.emplace(cxx, std::move(output)).first->second;
}

// Writes the headers into <cache>/include/<hash of all of them>/ (each file once) and returns that
// directory, the -I of the compile.
std::string materialize_headers(const DiskCache& cache, const std::vector<EmbeddedFile>& headers) {
  Hasher hasher;
  for (const EmbeddedFile& h : headers) hasher.field(h.path).field(h.contents);
  const std::string dir = cache.root() + "/include/" + hasher.hex();
  for (const EmbeddedFile& h : headers) {
    const fs::path rel(h.path);
    RT_ICHECK(rel.is_relative() && rel.lexically_normal().string().rfind("..", 0) != 0, "embedded header path '",
              h.path, "' must stay inside the include directory");
    const std::string path = dir + "/" + h.path;
    if (!fs::exists(path)) cache.write_atomic(path, h.contents);
  }
  return dir;
}

void compile(const std::string& cxx, const std::vector<std::string>& flags, const std::string& include_dir,
             const std::string& source_path, const std::string& so_path) {
  const std::string temp_so = unique_temp_path(so_path);
  const std::string log = temp_so + ".log";
  std::vector<std::string> argv{cxx};
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (!include_dir.empty()) argv.insert(argv.end(), {"-I", include_dir});
  argv.insert(argv.end(), {"-o", temp_so, source_path});

  // TL_JIT_VERBOSE: print each JIT compile command and its time to stderr.
  const bool verbose = env_flag("TL_JIT_VERBOSE");
  if (verbose) std::cerr << "[tl jit] " << shell_command(argv) << std::endl;
  const auto start = std::chrono::steady_clock::now();
  ++g_compile_count;
  const int status = run_process(argv, log);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (verbose) std::cerr << "[tl jit] compiled in " << seconds << " s (exit code " << status << ")" << std::endl;

  const std::string output = read_file(log).value_or("");
  ::unlink(log.c_str());
  if (status != 0) {
    ::unlink(temp_so.c_str());
    throw_internal_error(__FILE__, __LINE__,
                         str("the host C++ compiler failed (exit code ", status,
                             ") on generated code.\n  command: ", shell_command(argv),
                             "\n  source kept at: ", source_path, "\n", first_lines(output, kMaxErrorLines, "[... compiler output truncated ...]")));
  }
  // Atomic: another process loading or writing the same entry sees a complete library.
  if (std::rename(temp_so.c_str(), so_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_so.c_str());
    throw_user_error(str(so_path, ": error: cannot write: ", std::strerror(err)));
  }
}

}  // namespace

SharedLibrary::SharedLibrary(const std::string& path)
    : path_(path), handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (!handle_) throw_internal_error(__FILE__, __LINE__, str("cannot load the JIT library ", path, ": ", dlerror()));
}

SharedLibrary::~SharedLibrary() { dlclose(handle_); }

void* SharedLibrary::symbol(const std::string& name) const {
  dlerror();  // clear
  void* address = dlsym(handle_, name.c_str());
  if (!address) throw_internal_error(__FILE__, __LINE__, str("symbol '", name, "' is missing from ", path_));
  return address;
}

std::shared_ptr<SharedLibrary> compile_cxx(const std::string& source, const std::vector<EmbeddedFile>& headers,
                                           const HostCompileOptions& options) {
  const std::string cxx = find_compiler();
  std::vector<std::string> flags{"-std=c++20", "-O3", "-march=native", "-fPIC", "-shared"};
  if (options.openmp) flags.push_back("-fopenmp");
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  // TL_CXXFLAGS: extra flags for every JIT compile (split on whitespace; no quoting).
  for (std::string& f : split_words(env_string("TL_CXXFLAGS", ""))) flags.push_back(std::move(f));

  // Everything the library depends on. The include directory's location is not part of it (it
  // depends on the cache root); its contents are. -march=native ties the library to this CPU.
  Hasher key;
  key.field("tl host c++ v1").field(cxx).field(compiler_version(cxx)).field(cpu_info().features);
  for (const std::string& f : flags) key.field(f);
  key.field(source);
  for (const EmbeddedFile& h : headers) key.field(h.path).field(h.contents);
  const std::string hash = key.hex();

  const DiskCache cache;
  const std::string so_path = cache.path_for(hash, ".so");
  static std::mutex mutex;
  // By .so path. Never destroyed: closing the libraries at exit would unload libgomp under its idle
  // worker threads, which then crash.
  static auto& loaded = *new std::map<std::string, std::shared_ptr<SharedLibrary>>;
  {
    std::lock_guard lock(mutex);
    if (auto it = loaded.find(so_path); it != loaded.end()) return it->second;
  }
  // Outside the lock, so threads compile different kernels in parallel; two threads on the same
  // kernel both compile it once, harmlessly (the rename is atomic).
  if (!fs::exists(so_path)) {
    const std::string include_dir = headers.empty() ? "" : materialize_headers(cache, headers);
    const std::string source_path = cache.path_for(hash, ".cc");
    cache.write_atomic(source_path, source);
    compile(cxx, flags, include_dir, source_path, so_path);
  }
  auto library = std::make_shared<SharedLibrary>(so_path);
  std::lock_guard lock(mutex);
  return loaded.emplace(so_path, std::move(library)).first->second;
}

const std::string& host_compiler_version() { return compiler_version(find_compiler()); }

int64_t host_compile_count() { return g_compile_count.load(); }

}  // namespace rt
