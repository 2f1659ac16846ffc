// Where a test, demo or benchmark runs: the repository's files, and how busy the machine is.
#pragma once

#include <string>

namespace testutil {

// A file of the repository, `relative` to its root: the TL_SOURCE_DIR environment variable when set
// (a binary that travelled to another machine, as scripts/gpu_check.sh runs them), else the
// checkout it was built from.
std::string source_path(const std::string& relative);

// The first line of /proc/loadavg, "?" where there is none: CPU benchmarks print it beside their
// timings, since other work on the machine skews them.
std::string load_average();

}  // namespace testutil
