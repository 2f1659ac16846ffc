// The ordered list of passes from elaborated IR to the IR a code generator takes. TL_DUMP_IR=after_each
// prints the IR after every pass to stderr; TL_DUMP_IR=<pass name> after that pass only.
#pragma once

#include <string>
#include <vector>

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

ir::PrimFunc lower(const ir::PrimFunc& func, const PassOptions& options);
std::vector<std::string> pass_names(const Target& target);

}  // namespace tilelang::passes
