#include "rt/nvrtc.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <type_traits>

#include "rt/disk_cache.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/hash.h"

namespace fs = std::filesystem;

namespace rt {
namespace {

constexpr int kMaxLogLines = 60;  // of NVRTC's log in an error message
constexpr const char* kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

// NVRTC's C API, declared with our own names (nvrtcResult is an int enum, nvrtcProgram a pointer).
using NvrtcStatus = int;
using NvrtcProgram = struct NvrtcProgramOpaque*;
constexpr NvrtcStatus kNvrtcSuccess = 0;

struct NvrtcApi {
  std::string path;
  int major = 0, minor = 0;
  std::vector<int> archs;

  const char* (*nvrtcGetErrorString)(NvrtcStatus);
  NvrtcStatus (*nvrtcVersion)(int*, int*);
  NvrtcStatus (*nvrtcGetNumSupportedArchs)(int*);
  NvrtcStatus (*nvrtcGetSupportedArchs)(int*);
  NvrtcStatus (*nvrtcCreateProgram)(NvrtcProgram*, const char* src, const char* name, int num_headers,
                                    const char* const* headers, const char* const* include_names);
  NvrtcStatus (*nvrtcDestroyProgram)(NvrtcProgram*);
  NvrtcStatus (*nvrtcCompileProgram)(NvrtcProgram, int num_options, const char* const* options);
  NvrtcStatus (*nvrtcGetPTXSize)(NvrtcProgram, size_t*);
  NvrtcStatus (*nvrtcGetPTX)(NvrtcProgram, char*);
  NvrtcStatus (*nvrtcGetCUBINSize)(NvrtcProgram, size_t*);
  NvrtcStatus (*nvrtcGetCUBIN)(NvrtcProgram, char*);
  NvrtcStatus (*nvrtcGetProgramLogSize)(NvrtcProgram, size_t*);
  NvrtcStatus (*nvrtcGetProgramLog)(NvrtcProgram, char*);
};

struct NvrtcLoad {
  NvrtcApi api{};
  std::string error;  // empty when usable
};

std::atomic<int64_t> g_compile_count{0};
std::atomic<int64_t> g_serialized_wgmma_count{0};

// The lines of a ptxas verbose log that say it serialized wgmma instructions: "... (C7510) ..."
// to "(C7515)" (the "Potential Performance Loss: wgmma.mma_async instructions are serialized" family).
std::vector<std::string> serialized_wgmma_notes(const std::string& log) {
  std::vector<std::string> notes;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    if (line.find("(C75") != std::string::npos && line.find("wgmma") != std::string::npos) notes.push_back(line);
    at = end + 1;
  }
  return notes;
}

// The candidates, in the documented order. When TL_NVRTC_PATH is set it is the only candidate.
std::vector<std::string> candidates() {
  // TL_NVRTC_PATH: the NVRTC library to use (a file, or a directory holding libnvrtc.so*).
  const std::string forced = env_string("TL_NVRTC_PATH", "");
  std::vector<std::string> out;
  auto add_dir = [&](const std::string& dir) {
    for (const char* so : kSonames) out.push_back(dir + "/" + so);
  };
  if (!forced.empty()) {
    std::error_code ec;
    if (fs::is_directory(forced, ec))
      add_dir(forced);
    else
      out.push_back(forced);
    return out;
  }
  for (const char* so : kSonames) out.push_back(so);
  // CUDA_HOME, CUDA_PATH: toolkit roots searched for lib64/libnvrtc.so* after the loader's path.
  for (const std::string& root :
       {env_string("CUDA_HOME", ""), env_string("CUDA_PATH", ""), std::string("/usr/local/cuda")}) {
    if (root.empty()) continue;
    add_dir(root + "/lib64");
    add_dir(root + "/lib");
  }
  return out;
}

std::string loaded_path(void* lib, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

NvrtcLoad load_nvrtc() {
  NvrtcLoad load;
  void* lib = nullptr;
  std::string tried;
  std::string last_error;
  for (const std::string& candidate : candidates()) {
    lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      load.api.path = loaded_path(lib, candidate);
      break;
    }
    tried += (tried.empty() ? "" : ", ") + candidate;
    const char* why = dlerror();
    last_error = why ? why : "";
  }
  if (!lib) {
    const std::string forced = env_string("TL_NVRTC_PATH", "");
    load.error = forced.empty()
                     ? str("NVRTC (libnvrtc.so) not found: the CUDA backend compiles kernels with NVRTC from the CUDA "
                           "toolkit; install it (or the nvidia-cuda-nvrtc package), set CUDA_HOME or TL_NVRTC_PATH, or "
                           "use --target cpu. Tried: ",
                           tried)
                     : str("TL_NVRTC_PATH=", forced, " cannot be loaded: ", last_error);
    return load;
  }
  NvrtcApi& a = load.api;
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += str(missing.empty() ? "" : ", ", name);
  };
  resolve(a.nvrtcGetErrorString, "nvrtcGetErrorString");
  resolve(a.nvrtcVersion, "nvrtcVersion");
  resolve(a.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  resolve(a.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs");
  resolve(a.nvrtcCreateProgram, "nvrtcCreateProgram");
  resolve(a.nvrtcDestroyProgram, "nvrtcDestroyProgram");
  resolve(a.nvrtcCompileProgram, "nvrtcCompileProgram");
  resolve(a.nvrtcGetPTXSize, "nvrtcGetPTXSize");
  resolve(a.nvrtcGetPTX, "nvrtcGetPTX");
  resolve(a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  resolve(a.nvrtcGetCUBIN, "nvrtcGetCUBIN");
  resolve(a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  resolve(a.nvrtcGetProgramLog, "nvrtcGetProgramLog");
  if (!missing.empty()) {
    load.error = str("the NVRTC library ", a.path, " lacks ", missing, ": it is too old; use NVRTC 12 or newer");
    return load;
  }
  if (a.nvrtcVersion(&a.major, &a.minor) != kNvrtcSuccess) {
    load.error = str("the NVRTC library ", a.path, " does not report its version (nvrtcVersion failed)");
    return load;
  }
  int n = 0;
  if (a.nvrtcGetNumSupportedArchs(&n) == kNvrtcSuccess && n > 0) {
    a.archs.resize(n);
    if (a.nvrtcGetSupportedArchs(a.archs.data()) != kNvrtcSuccess) a.archs.clear();
  }
  return load;
}

const NvrtcLoad& nvrtc_load() {
  static const NvrtcLoad load = load_nvrtc();
  return load;
}

const NvrtcApi& nvrtc() {
  const NvrtcLoad& load = nvrtc_load();
  if (!load.error.empty()) throw_user_error(load.error);
  return load.api;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}


// "sm_90a" -> 90 and "a"; a user error for anything else or an arch this NVRTC cannot target.
std::pair<int, std::string> parse_arch(const NvrtcApi& api, const std::string& arch) {
  const std::string digits = arch.rfind("sm_", 0) == 0 ? arch.substr(3) : "";
  size_t n = 0;
  while (n < digits.size() && std::isdigit(static_cast<unsigned char>(digits[n]))) ++n;
  const std::string suffix = digits.substr(n);
  RT_USER_CHECK(n >= 2 && n <= 3 && (suffix.empty() || suffix == "a" || suffix == "f"), "NVRTC: '", arch,
                "' is not a GPU architecture; use sm_<major><minor>[a], e.g. sm_80 or sm_90a");
  const int number = std::stoi(digits.substr(0, n));
  bool supported = api.archs.empty();  // unknown list: let NVRTC decide
  std::string list;
  for (int a : api.archs) {
    supported |= a == number;
    list += str(list.empty() ? "" : ", ", "sm_", a);
  }
  RT_USER_CHECK(supported, "NVRTC ", api.major, ".", api.minor, " (", api.path, ") cannot compile for ", arch,
                "; it supports ", list);
  return {number, suffix};
}

// Owns an nvrtcProgram.
class Program {
 public:
  explicit Program(const NvrtcApi& api) : api_(api) {}
  ~Program() {
    if (prog_) api_.nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  NvrtcProgram* out() { return &prog_; }
  NvrtcProgram get() const { return prog_; }

 private:
  const NvrtcApi& api_;
  NvrtcProgram prog_ = nullptr;
};

// NVRTC's output of `size` then `get`, without the trailing NUL NVRTC counts.
template <class SizeFn, class GetFn>
std::string fetch(NvrtcProgram prog, SizeFn size_fn, GetFn get_fn) {
  size_t size = 0;
  if (size_fn(prog, &size) != kNvrtcSuccess || size == 0) return "";
  std::string out(size, '\0');
  if (get_fn(prog, out.data()) != kNvrtcSuccess) return "";
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

}  // namespace

bool nvrtc_available() {
  try {
    return nvrtc_load().error.empty();
  } catch (...) {
    return false;
  }
}

std::string nvrtc_error() {
  try {
    return nvrtc_load().error;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string nvrtc_version() {
  const NvrtcApi& api = nvrtc();
  return str(api.major, ".", api.minor);
}

std::string nvrtc_library_path() { return nvrtc().path; }

std::vector<int> nvrtc_supported_archs() { return nvrtc().archs; }

int64_t nvrtc_compile_count() { return g_compile_count.load(); }

int64_t nvrtc_serialized_wgmma_count() { return g_serialized_wgmma_count.load(); }

NvrtcResult compile_cuda(const std::string& source, const std::string& name, const std::vector<EmbeddedFile>& headers,
                         const NvrtcOptions& options) {
  const NvrtcApi& api = nvrtc();
  const auto [number, suffix] = parse_arch(api, options.arch);
  const std::string target = options.want_cubin ? options.arch : str("compute_", number, suffix);
  std::vector<std::string> flags{"-std=c++20", "--gpu-architecture=" + target, "-default-device"};
  if (options.lineinfo) flags.push_back("-lineinfo");
  // ptxas says it serialized wgmma only in its verbose log (wgmma exists on sm_90a alone).
  const bool watch_wgmma = options.want_cubin && options.arch == "sm_90a";
  if (watch_wgmma && std::find(options.extra.begin(), options.extra.end(), "--ptxas-options=-v") == options.extra.end())
    flags.push_back("--ptxas-options=-v");
  // NVRTC 12.9+ keeps its own cache of cubins in the driver's compute cache where a driver is
  // present: a hit skips ptxas and with it the log (on the H200 the compile-everything tests found
  // kernels that other tests had compiled with no "ptxas info" line). Our disk cache already skips
  // repeated compiles, so NVRTC's is turned off where the log is read.
  const bool has_no_cache = api.major > 12 || (api.major == 12 && api.minor >= 9);
  const bool no_cache_given = std::find(options.extra.begin(), options.extra.end(), "--no-cache") != options.extra.end();
  if (watch_wgmma && has_no_cache && !no_cache_given) flags.push_back("--no-cache");
  flags.insert(flags.end(), options.extra.begin(), options.extra.end());

  Hasher key;
  key.field("tl nvrtc v1").field(str(api.major, ".", api.minor)).field(options.arch).field(name);
  for (const std::string& f : flags) key.field(f);
  key.field(source);
  for (const EmbeddedFile& h : headers) key.field(h.path).field(h.contents);
  const std::string hash = key.hex();

  const DiskCache cache;
  const std::string ptx_path = cache.path_for(hash, ".ptx");
  const std::string cubin_path = cache.path_for(hash, ".cubin");
  // The PTX is written last, so its presence means the entry is complete.
  if (std::optional<std::string> ptx = cache.read(ptx_path); ptx && !ptx->empty()) {
    NvrtcResult hit;
    hit.ptx = std::move(*ptx);
    hit.cached = true;
    if (!options.want_cubin) return hit;
    if (std::optional<std::string> cubin = cache.read(cubin_path); cubin && !cubin->empty()) {
      hit.cubin = std::move(*cubin);
      return hit;
    }
  }

  const std::string source_path = cache.path_for(hash, ".cu");
  cache.write_atomic(source_path, source);
  std::vector<const char*> header_contents, header_names;
  for (const EmbeddedFile& h : headers) {
    header_contents.push_back(h.contents);
    header_names.push_back(h.path);
  }
  std::vector<const char*> argv;
  for (const std::string& f : flags) argv.push_back(f.c_str());

  // TL_JIT_VERBOSE: print each JIT compile (here: NVRTC's options) and its time to stderr.
  const bool verbose = env_flag("TL_JIT_VERBOSE");
  if (verbose) std::cerr << "[tl jit] nvrtc " << join(flags) << " " << name << " (" << source_path << ")" << std::endl;
  const auto start = std::chrono::steady_clock::now();
  ++g_compile_count;
  Program prog(api);
  const NvrtcStatus created =
      api.nvrtcCreateProgram(prog.out(), source.c_str(), name.c_str(), static_cast<int>(headers.size()),
                             header_contents.data(), header_names.data());
  if (created != kNvrtcSuccess)
    throw_internal_error(__FILE__, __LINE__,
                         str("nvrtcCreateProgram failed for ", name, ": ", api.nvrtcGetErrorString(created)));
  const NvrtcStatus status = api.nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  NvrtcResult result;
  result.log = fetch(prog.get(), api.nvrtcGetProgramLogSize, api.nvrtcGetProgramLog);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (verbose)
    std::cerr << "[tl jit] nvrtc compiled " << name << " in " << result.seconds << " s ("
              << api.nvrtcGetErrorString(status) << ")" << std::endl;
  if (status != kNvrtcSuccess)
    throw_internal_error(__FILE__, __LINE__,
                         str("NVRTC ", api.major, ".", api.minor, " failed to compile ", name, " for ", options.arch,
                             " (", api.nvrtcGetErrorString(status), ") on generated code.\n  options: ", join(flags),
                             "\n  source kept at: ", source_path, "\n", first_lines(result.log, kMaxLogLines, "[... NVRTC log truncated ...]")));
  if (watch_wgmma) result.serialized_wgmma = serialized_wgmma_notes(result.log);
  if (!result.serialized_wgmma.empty()) {
    ++g_serialized_wgmma_count;
    std::cerr << "[tl jit] warning: ptxas serialized the wgmma instructions of " << name
              << " (correct, but slow: a performance bug of the code that generated it):\n";
    for (const std::string& note : result.serialized_wgmma) std::cerr << "  " << note << "\n";
    std::cerr << std::flush;
  }
  result.ptx = fetch(prog.get(), api.nvrtcGetPTXSize, api.nvrtcGetPTX);
  RT_ICHECK(!result.ptx.empty(), "NVRTC produced no PTX for ", name, " (", join(flags), ")");
  if (options.want_cubin) {
    result.cubin = fetch(prog.get(), api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN);
    RT_ICHECK(!result.cubin.empty(), "NVRTC produced no cubin for ", name, " (", join(flags), ")");
    cache.write_atomic(cubin_path, result.cubin);
  }
  cache.write_atomic(ptx_path, result.ptx);
  return result;
}

}  // namespace rt
