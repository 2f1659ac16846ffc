// JIT of CUDA C++ through NVRTC: generated source -> PTX and cubin, cached on disk by content
// (DESIGN: "shape-specialized JIT with a content-addressed disk cache"). libnvrtc is loaded with
// dlopen on first use, so binaries run where it is absent; compiling needs no GPU and no driver.
//
// Where libnvrtc is looked for, in order: TL_NVRTC_PATH (the library file, or a directory holding
// it); the sonames libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so on the loader's path; then the lib64
// directories of $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rt/embedded_file.h"

namespace rt {

struct NvrtcOptions {
  std::string arch;                // "sm_90a", "sm_80", ...: the GPU the code is for
  std::vector<std::string> extra;  // more NVRTC options, after ours (e.g. "--use_fast_math", "-DX=1")
  bool lineinfo = true;            // -lineinfo (source lines for profilers; no effect on the code)
  bool want_cubin = true;          // also produce the cubin (machine code); else PTX only
};

struct NvrtcResult {
  std::string ptx;     // always present
  std::string cubin;   // when want_cubin
  std::string log;     // NVRTC's warnings; empty when `cached`
  // ptxas's notes that it serialized wgmma instructions (its "C75xx" lines), from an sm_90a cubin
  // compile: the kernel is correct but loses most of its tensor-core overlap. Empty when `cached`.
  std::vector<std::string> serialized_wgmma;
  double seconds = 0;  // compile time (0 when cached)
  bool cached = false;
};

// Compiles `source` (program name `name`, used in diagnostics, e.g. "gemm.cu") with `headers` as
// in-memory includes (`#include "tl/device/..."` resolves to the EmbeddedFile with that path; no
// toolkit headers are on the include path, so device headers must be self-contained).
// Options: -std=c++20 --gpu-architecture=<arch> -default-device [-lineinfo] <extra...>. With
// want_cubin the real architecture (sm_90a) is compiled, which yields both PTX and cubin; without,
// the virtual one (compute_90a) for PTX alone.
//
// Results are cached in DiskCache (<key>.ptx, <key>.cubin) under a key hashing the source, the
// headers, the options, the arch and the NVRTC version. TL_JIT_VERBOSE=1 prints each compile's
// options and time. A cubin for sm_90a is compiled with ptxas's verbose log, whose notes of
// serialized wgmma (ptxas reports them only there, as "info") are kept in the result and printed
// as a warning on stderr: generated code that ptxas serializes is a performance bug to report. A compile error is an internal error (generated code must compile) carrying
// the first lines of NVRTC's log; the source stays in the cache directory (<key>.cu) for
// inspection. An unknown or unsupported arch, or a missing NVRTC, is a user error.
NvrtcResult compile_cuda(const std::string& source, const std::string& name, const std::vector<EmbeddedFile>& headers,
                         const NvrtcOptions& options);

// Whether libnvrtc can be loaded. Never throws.
bool nvrtc_available();
// Why not ("" when it can). Never throws.
std::string nvrtc_error();
// NVRTC's version ("13.0") and the path of the loaded library. User error when NVRTC is missing.
std::string nvrtc_version();
std::string nvrtc_library_path();
// The real architectures this NVRTC compiles for, e.g. {75, 80, 86, ..., 90, 100, ...}.
std::vector<int> nvrtc_supported_archs();
// How many times this process has run NVRTC: a cache hit leaves it unchanged.
int64_t nvrtc_compile_count();
// How many of those compiles had wgmma serialized by ptxas (NvrtcResult::serialized_wgmma).
int64_t nvrtc_serialized_wgmma_count();

}  // namespace rt
