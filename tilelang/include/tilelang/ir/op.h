// Typed expression builders: arithmetic with dtype promotion, comparisons, casts and math
// intrinsics, folding integer constants as they are built. The elaborator and the passes make
// expressions through these so that typing rules live in one place.
//
// Promotion: bool < integers < floats; between integers the wider wins; between floats the wider
// wins, and f16 with bf16 (or two different 8-bit floats) gives f32. Integer arithmetic happens in
// at least i32, as in C. Arithmetic on 16- and 8-bit
// floats is nominally in that type; backends compute it in f32 and round when storing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

DType promote(DType a, DType b);
// Whether integer type t (int8, uint8, int32, int64) holds the value v; false for other types.
bool holds(DType t, int64_t v);

Expr add(Expr a, Expr b, SourceLoc loc = {});
Expr sub(Expr a, Expr b, SourceLoc loc = {});
Expr mul(Expr a, Expr b, SourceLoc loc = {});
Expr true_div(Expr a, Expr b, SourceLoc loc = {});  // Python '/': integers divide as f32
Expr floor_div(Expr a, Expr b, SourceLoc loc = {});
Expr floor_mod(Expr a, Expr b, SourceLoc loc = {});
Expr min(Expr a, Expr b, SourceLoc loc = {});
Expr max(Expr a, Expr b, SourceLoc loc = {});
Expr pow(Expr a, Expr b, SourceLoc loc = {});
Expr bitwise(BinaryOp op, Expr a, Expr b, SourceLoc loc = {});  // &, |, ^, <<, >> on integers
Expr binary(BinaryOp op, Expr a, Expr b, SourceLoc loc = {});  // any op, dispatching to the above
Expr compare(BinaryOp op, Expr a, Expr b, SourceLoc loc = {});
Expr logical_and(Expr a, Expr b, SourceLoc loc = {});
Expr logical_or(Expr a, Expr b, SourceLoc loc = {});
Expr logical_not(Expr a, SourceLoc loc = {});
Expr neg(Expr a, SourceLoc loc = {});
Expr bit_not(Expr a, SourceLoc loc = {});  // ~ on integers
Expr select(Expr cond, Expr t, Expr f, SourceLoc loc = {});
Expr cast(DType dtype, Expr value, SourceLoc loc = {});  // folds constants
// An explicit conversion (T.cast, a dtype called, an annotated assignment): cast, but a narrow float
// expression that kernels compute in float32 (`x_f16 * 3.0`) is rounded to its own type too.
Expr convert(DType dtype, Expr value, SourceLoc loc = {});

// Math intrinsics known to every backend: exp exp2 log log2 log10 sqrt rsqrt abs sin cos tan tanh
// sigmoid floor ceil round trunc erf pow fma. Integer arguments of float functions become f32.
bool is_math_intrinsic(const std::string& name);

// Intrinsics the CUDA lowering makes and only the CUDA code generator emits:
inline constexpr const char* kWarpShflXor = "warp_shfl_xor";      // (value, lane mask): __shfl_xor_sync over the warp
inline constexpr const char* kAsyncCopy = "async_copy";           // (value) stored by cp.async, complete after a wait
inline constexpr const char* kAsyncCommit = "async_copy_commit";  // (): closes the thread's group of cp.async copies
inline constexpr const char* kAsyncWait = "async_copy_wait";      // (n): waits until at most n groups are in flight
// (n), right after a gemm: on wgmma the gemm may stay in flight up to here, until at most n of the
// thread's gemm groups are pending (a software-pipelined loop's gemm; no-op for synchronous gemms).
inline constexpr const char* kGemmInFlight = "gemm_in_flight";
// The waits of wgmma gemms (passes/wgmma_waits.h): a gemm followed by wgmma_async() is issued and
// committed as one group and not waited for there; wgmma_wait(n, acc...) waits until at most n of
// the warpgroup's groups are pending and pins the accumulators of those that completed (each `acc`
// a load of an accumulator's first element); wgmma_commit() commits an empty group (in a branch that
// skips a gemm, so that the group counts agree on both paths); wgmma_pin(acc...) before a gemm pins
// the other accumulators not in flight (code on them stays before the gemm's issue: ptxas
// serializes wgmma where registers of a gemm are touched between its issue and its wait).
inline constexpr const char* kWgmmaAsync = "wgmma_async";
inline constexpr const char* kWgmmaPin = "wgmma_pin";
inline constexpr const char* kWgmmaWait = "wgmma_wait";
inline constexpr const char* kWgmmaCommit = "wgmma_commit";
// The mbarriers of a pipelined loop's bulk copies (tile_copy_tma.h): per stage a "full" one, and
// with free = 1 a "free" one after them (bars[stages + s]) that the warps release the stage on.
inline constexpr const char* kBulkInit = "bulk_copy_init";        // (address_of(bars[0]), stages, free): set up by one thread
inline constexpr const char* kBulkArrive = "bulk_copy_arrive";    // (address_of(full)): a stage's copies are all issued
inline constexpr const char* kBulkWait = "bulk_copy_wait";        // (address_of(full), parity): they have landed
inline constexpr const char* kBulkRelease = "bulk_copy_release";  // (address_of(free)): this warp is done with the stage
inline constexpr const char* kBulkAcquire = "bulk_copy_acquire";  // (address_of(free), parity): thread 0 waits for every warp's release
// A persistent kernel's epilogue stores a staging tile by TMA (a CopyNode from the shared tile to a
// global box, its barrier 0): thread 0 issues the boxes, then closes them into a group; before the
// tile is written again, it waits until the group has read it (tile_copy_tma.h).
inline constexpr const char* kBulkStoreCommit = "bulk_store_commit";
inline constexpr const char* kBulkStoreWaitRead = "bulk_store_wait_read";
// (threads): the condition of a warp-specialized kernel's branch (pipeline_loads_cuda), true in the
// producer warpgroup the launch gets after the kernel's `threads`. Its then-branch issues the bulk
// copies (from one thread of the warpgroup), its else-branch is the kernel on those threads, which
// synchronize among themselves only.
inline constexpr const char* kProducerWarpgroup = "producer_warpgroup";
// A persistent warp-specialized kernel (pipeline_loads_cuda) launches at most as many blocks as the
// GPU runs at once, and each role walks the T.Kernel's blocks c, c + launched, ... in a loop:
// persistent_rounds() is how many this block runs, persistent_block(r, d) coordinate d of its r-th
// (tile_scheduler.h's PersistentBlocks, the kernel's T.use_swizzle order).
inline constexpr const char* kPersistentRounds = "persistent_rounds";
inline constexpr const char* kPersistentBlock = "persistent_block";
Expr call_math(const std::string& name, std::vector<Expr> args, SourceLoc loc = {});

std::optional<int64_t> as_const_int(const Expr& e);
std::optional<double> as_const_float(const Expr& e);  // float or integer constants
bool is_const_int(const Expr& e, int64_t value);

// The dtype used for index arithmetic: i64 when any operand is i64, else i32.
DType index_dtype(const Expr& a, const Expr& b);

}  // namespace tilelang::ir
