// Which fragments of a GPU kernel live in registers rather than shared memory, and in what layout
// (lower_kernel_cuda acts on it); and the rule for running a tile gemm on the tensor cores.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "tilelang/analysis/thread_dependence.h"
#include "tilelang/ir/fragment_layout.h"

namespace tilelang::analysis {

// The 8-bit inputs a target's tensor cores take besides 16-bit floats: int8 / uint8 into int32
// from sm_80 (mma.sync m16n8k32), float8 (e4m3, e5m2) into float32 from sm_89 (mma.sync) and on
// wgmma (sm_90a); both K-major only.
struct EightBitInputs {
  bool integers = false, floats = false;
};
EightBitInputs eight_bit_inputs(const std::string& arch);

// Whether a gemm in a block of `threads` threads can run on the tensor cores by its types, layouts
// and K: 16-bit float A and B of one dtype into a float C inside the block, K in whole 16-element
// steps; or, where `eight_bit` allows, 8-bit A and B (each type on its own: int8 with uint8, e4m3
// with e5m2) K-major (A not transposed, B transposed) in whole 32-element steps.
bool tensor_core_gemm(const ir::GemmNode& g, int64_t threads, EightBitInputs eight_bit = {});

// Whether a gemm's operands are 8-bit.
bool eight_bit_gemm(const ir::GemmNode& g);

// Whether a gemm runs on wgmma (its accumulator in the warpgroup layout); whether a statement holds one.
bool is_wgmma(const ir::GemmNode& g);
bool calls_wgmma(const ir::Stmt& stmt);

// A full 2-D T.Parallel nest over a tile: `for i in T.Parallel(rows): for j in T.Parallel(cols): body`
// with both loops from 0 and constant extents; none for any other loop.
struct TileNest {
  const ir::ForNode* rows;
  const ir::ForNode* cols;
  int64_t extent_rows, extent_cols;
};
std::optional<TileNest> tile_nest(const ir::ForNode& outer);

// A reduction along the rows of a 2-D tile, as lower_tile_ops writes T.reduce_* over the last
// dimension:
//   for i in T.Parallel(rows): alloc red; red = init; for r in serial(cols): red = combine(red, element); store
// where `element` reads the source only at [i, r], `combine` is +, max or min, and `store` writes
// red out (neither init nor store uses r). None for any other loop.
struct RowReduction {
  const ir::ForNode* rows;
  const ir::ForNode* cols;
  ir::Buffer red;
  ir::Expr init;
  ir::BinaryOp combine;
  ir::Expr element;
  ir::Stmt store;
  const ir::BufferNode* source;
};
std::optional<RowReduction> row_reduction(const ir::ForNode& outer);

// The fragments of a kernel launch to keep in registers, with their layouts: a 2-D float fragment
// that tensor-core gemms accumulate into (the whole tile, A and B from shared memory in rows that
// ldmatrix can address) and that is otherwise only accessed element-wise in tile nests over its
// whole shape, as F[i, j] with i and j the nest's variables (T.clear, T.fill, T.copy in and out,
// and element-wise T.Parallel code all lower to such nests), or in row reductions of the whole
// tile (the fragment then takes whole rows per warp). Each thread then touches only the elements
// its registers hold; so a fragment touched under per-thread control (an if or loop on the
// thread index) stays in shared memory, as do all other fragments.
//
// With `warpgroup`, the layouts are wgmma's (FragmentLayout::warpgroup_accumulator) and the gemms'
// operands must also be tiles wgmma can read (swizzlable, see swizzled_tiles; K-major rows of 32,
// 64 or a multiple of 128 bytes, MN-major rows of a multiple of 128 bytes and an N-major B read in
// whole 64-column panels). With `register_a` too, a 2-D 16- or 8-bit fragment that is read whole as
// the (not transposed) A operand of such gemms, each with its accumulator in registers and of its
// rows, and otherwise accessed as the accumulators may be (not reduced), lives in registers in the
// accumulator layout: wgmma reads it from there (a cast accumulator, such as attention's P; 8-bit
// elements are reordered into wgmma's k32 fragment at the gemm).
// `eight_bit`: the 8-bit gemms the target's tensor cores take (their int32 accumulators are candidates too).
std::map<const ir::BufferNode*, ir::FragmentLayout> register_fragments(const ir::KernelLaunchNode& kernel, const ThreadDependence& dep,
                                                                      bool warpgroup = false, bool register_a = false, EightBitInputs eight_bit = {});

// The shared tiles of a kernel to swizzle (device/cuda/swizzle.h), given its register fragments:
// operands of gemms that accumulate in registers, with rows of 2, 4 or a multiple of 8 16-byte
// chunks, read from column 0 and a row that is a multiple of 8 of their 2-D slice, and otherwise
// used only through element loads and stores and bulk copies (not by other gemms, not by address).
std::set<const ir::BufferNode*> swizzled_tiles(const ir::KernelLaunchNode& kernel, const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers);

// The register fragments and swizzled tiles of a kernel for `arch` ("sm_90a", "sm_80", ...): wgmma
// layouts on sm_90a when they keep the same accumulators in registers and every gemm into them
// reads swizzled operands (or, with `register_a`, A from registers), else mma.sync's.
struct TensorCorePlan {
  std::map<const ir::BufferNode*, ir::FragmentLayout> registers;
  std::set<const ir::BufferNode*> swizzled;
};
TensorCorePlan tensor_core_plan(const ir::KernelLaunchNode& kernel, const ThreadDependence& dep, const std::string& arch, bool register_a);

}  // namespace tilelang::analysis
