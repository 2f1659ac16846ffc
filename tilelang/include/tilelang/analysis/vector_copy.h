// Which copies a GPU block can do 16 bytes per thread at a time (one vector load and store), and
// whether a statement is a global -> shared copy that cp.async can stage ahead (pipeline_cuda).
#pragma once

#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

// The load a vectorizable store copies: its value, or a bounds guard `select(cond, load, 0)` whose
// condition holds for the whole vector (does not use the innermost loop variable `inner`); the
// async_copy marker of pipeline_cuda is looked through. Null for any other store.
const ir::BufferLoadNode* vector_source(const ir::BufferStoreNode& st, const ir::VarNode* inner);
// The guard of such a store, or null.
const ir::SelectNode* vector_guard(const ir::BufferStoreNode& st);

// Elements per 16-byte vector when a loop nest's body copies a tensor element to another tensor of
// the same 16- or 32-bit dtype, both contiguous and 16-byte aligned along the innermost loop
// (offsets proven multiples of the vector; global tensors' bases aligned only when
// `tensors_aligned`); 1 otherwise.
int64_t vector_width(const std::vector<const ir::ForNode*>& nest, const ir::Stmt& body, bool tensors_aligned);

}  // namespace tilelang::analysis
