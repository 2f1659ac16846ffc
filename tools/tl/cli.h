// The `tl` command's shared pieces: parsed options and the subcommands.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tilelang/module.h"

namespace tl_cli {

struct Options {
  std::string file;
  std::vector<std::string> inputs;   // --in and --inout, in order
  std::vector<size_t> inouts;        // which of `inputs` came by --inout (written back after the run)
  std::vector<std::string> outputs;  // --out
  std::vector<tilelang::frontend::TensorSpec> shapes;  // --shape
  std::map<std::string, std::string> params;  // --param
  std::string kernel;                         // --kernel
  std::string target;                         // --target
  std::string emit;                           // --emit
  int repeat = 0;                             // --repeat: time this many runs
  std::vector<std::pair<std::string, std::vector<std::string>>> space;  // --space NAME=V1,V2,...
};

int run_command(const Options& options);
int compile_command(const Options& options);
int demo_command(const Options& options);
int tune_command(const Options& options);

tilelang::CompileOptions compile_options(const Options& options);

}  // namespace tl_cli
