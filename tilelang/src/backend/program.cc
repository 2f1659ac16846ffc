#include "backend/program.h"

#include <regex>

#include "backend/cpu_program.h"
#include "backend/cuda_program.h"
#include "rt/error.h"

// The device headers compiled into this library (see cmake/EmbedFiles.cmake).
const rt::EmbeddedFile* tilelang_embedded_files(std::size_t* count);

namespace tilelang::backend {

std::vector<rt::EmbeddedFile> device_headers() {
  size_t n = 0;
  const rt::EmbeddedFile* files = tilelang_embedded_files(&n);
  return std::vector<rt::EmbeddedFile>(files, files + n);
}

std::unique_ptr<Program> build_program(const ir::PrimFunc& lowered, const Target& target) {
  if (target.kind == Target::Kind::CPU) return build_cpu_program(lowered);
  return build_cuda_program(lowered, target);
}

void report_user_code_failure(const std::vector<SourceLoc>& user_code, const std::string& log, const char* compiler) {
  // The first diagnostic: "file:12:5: error: ..." (g++, clang) or "file.cu(12): error: ..." (NVRTC).
  std::string first = "(see the log)", kept;
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"((?::\d+:\d+|\(\d+\)): error: ([^\n]*))"))) first = m[1].str();
  if (std::regex_search(log, m, std::regex(R"(source kept at: ([^\n]*))"))) kept = m[1].str();
  error_at(user_code.front(), rt::str("the ", compiler, " rejected code written with T.call_extern or T.inline_code: ", first),
           kept.empty() ? "" : rt::str("    (generated source: ", kept, ")"));
}

}  // namespace tilelang::backend
