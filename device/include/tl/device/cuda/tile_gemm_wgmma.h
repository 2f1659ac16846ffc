// The gemm of a tile program on Hopper's warpgroup tensor cores (sm_90a): acc (=|+=) opA(A) opB(B)
// with A and B tiles in shared memory, in the swizzled layout of swizzle.h (or A a 16-bit register
// fragment in the accumulator layout: tile_gemm_wgmma_rs), and the accumulator tile in the registers
// of the block's threads. Inputs: 16-bit floats (float16, bfloat16) into FP32, either operand
// transposed; 8-bit floats (e4m3, e5m2, A and B each either) into FP32 and 8-bit integers (int8,
// uint8, each either) into int32, K-major operands only (A [M, K], B [N, K]: wgmma reads no other
// 8-bit layout).
//
// Accumulator layout (tilelang/ir/fragment_layout.h, warpgroup kind): the tile's rows are split
// evenly over the block's warpgroups (128 threads each); a warpgroup's kAtomsM * 64 rows are
// kAtomsM wgmma tiles of 64 rows, and warp w % 4 of the warpgroup holds rows 16 (w % 4) .. + 15 of
// each. Register 4 * (am * kCols / 8 + an) + c of a lane l holds row 64 am + 16 (w % 4) + l / 4 +
// 8 (c / 2), column 8 an + 2 (l % 4) + c % 2 of its warpgroup's rows: per 64-row tile, exactly the
// registers of one m64nNk16 instruction (wgmma.h), so the mma.sync atom numbering carries over.
//
// The call issues the whole K extent as one wgmma group and waits until at most kPending groups of
// the warpgroup are in flight: with 0 the accumulator registers and the operand tiles are free when
// it returns; with 1 (a software-pipelined loop's gemm) this gemm runs on, the previous one has
// finished, and a wgmma_wait_group<0> after the loop completes the last one; with -1 it does
// not wait at all (passes/wgmma_waits.h places a wgmma_wait_group and fence_register_tile later). Shared tiles
// written by threads (not by TMA) must have been made visible to the async proxy (fence.proxy.async)
// by the threads that wrote them, before the barrier that precedes the call; the code generator
// emits the fence with every barrier of a kernel that calls this.
#pragma once

#include "tl/device/cuda/swizzle.h"
#include "tl/device/cuda/wgmma.h"

namespace tl::cuda {

// An operand tile of kRows rows of kLd elements of kBytes bytes (2, or 1 K-major only) in the
// swizzled layout, as wgmma descriptors see it; (row, col) arguments are relative to the operand's
// origin, rows multiples of 8.
template <int kLd, int kRows, int kBytes = 2>
struct WgmmaOperand {
  static constexpr int kRowBytes = kLd * kBytes;
  static constexpr uint32_t kAtomBytes = kRowBytes < 128 ? kRowBytes : 128;  // one swizzled row
  static constexpr SmemSwizzle kSwizzle = kAtomBytes == 128 ? SmemSwizzle::k128B : kAtomBytes == 64 ? SmemSwizzle::k64B : SmemSwizzle::k32B;

  // K-major (rows along M or N, columns along K): 8-row groups 8 swizzled rows apart; a k step
  // (k16 of 16-bit, k32 of 8-bit elements) moves 32 bytes within a row (or to the next 128-byte panel).
  template <class T>
  static TL_DEVICE uint64_t k_major(const T* tile, int mn, int k) {
    return make_smem_desc(tile + swizzled_offset<kLd, kBytes, kRows>(mn, k), 16u, 8u * kAtomBytes, kSwizzle);
  }
  // MN-major (rows along K, columns along M or N): 8 k-rows per 1024-byte group, the next 64 M or
  // N in the next 128-byte panel, kRows * 128 bytes on.
  template <class T>
  static TL_DEVICE uint64_t mn_major(const T* tile, int k, int mn) {
    static_assert(kRowBytes % 128 == 0 && kBytes == 2, "an MN-major wgmma operand has 16-bit elements, rows of a multiple of 128 bytes");
    return make_smem_desc(tile + swizzled_offset<kLd, 2, kRows>(k, mn), uint32_t(kRows) * 128u, 1024u, SmemSwizzle::k128B);
  }
  // The descriptor of the element (row, col) relative to the one of `origin` (either major; rows
  // multiples of 8, columns of whole 16-byte chunks): the layout is linear there (swizzle.h), so
  // only the start address moves. The instructions' descriptors are the origin's built once plus
  // constants, not rebuilt from addresses (uniform-datapath work per instruction).
  static TL_DEVICE uint64_t at(uint64_t origin, int row, int col) {
    return smem_desc_add(origin, uint32_t(swizzled_offset<kLd, kBytes, kRows>(row, col)) * uint32_t(kBytes));
  }
};

// The instruction width for kCols accumulator columns: all of them when wgmma has that size, else
// the widest power of two that divides them.
__host__ __device__ constexpr int wgmma_instruction_n(int cols) {
  if (cols <= 256 && (cols % 16 == 0 || cols == 8 || cols == 24)) return cols;
  for (int n = 128; n >= 8; n /= 2)
    if (cols % n == 0) return n;
  return 0;
}

// Pins the kRegs registers of a gemm's accumulator (float or int32_t) or register A operand
// (16-bit elements, two a register; 8-bit, four) at a point: after the wait that completed the gemm
// (no access moves above it), or before the wgmma fence (their writes complete before it).
template <int kRegs, class T>
TL_DEVICE void fence_register_tile(T* regs) {
  if constexpr (sizeof(T) == 4) {
    fence_accumulators(*reinterpret_cast<T(*)[kRegs]>(regs));
  } else {
    constexpr int kPerWord = 4 / int(sizeof(T));
    static_assert((sizeof(T) == 2 || sizeof(T) == 1) && kRegs % kPerWord == 0, "a register tile of float or of 16- or 8-bit words");
#pragma unroll
    for (int i = 0; i < kRegs / kPerWord; ++i) fence_operand(reinterpret_cast<uint32_t*>(regs)[i]);
  }
}

namespace detail {

// The descriptor origin of a gemm's B tile (K x N, or N x K when kTransB).
template <bool kTransB, int kLdb, int kRowsB, class T>
TL_DEVICE uint64_t wgmma_b_origin(const T* B) {
  using OpB = WgmmaOperand<kLdb, kRowsB, int(sizeof(T))>;
  if constexpr (kTransB) return OpB::k_major(B, 0, 0);
  else return OpB::mn_major(B, 0, 0);
}

// One m64 x kN instruction of a gemm reading both operands from shared memory, by input type:
// 16-bit k16 (either operand transposed), 8-bit floats or integers k32 (K-major).
template <class TA, class TB, int kN, bool kTransA, bool kTransB, class Acc>
TL_DEVICE void wgmma_ss_step(uint64_t da, uint64_t db, Acc (&d)[kN / 2], bool accumulate) {
  if constexpr (sizeof(TA) == 2) {
    wgmma_m64k16_ss<TA, kN, !kTransB, kTransA>(da, db, d, accumulate);
  } else if constexpr (is_same_v<Acc, float>) {
    wgmma_m64k32_ss_fp8<kN, is_same_v<TA, float8_e5m2_t>, is_same_v<TB, float8_e5m2_t>>(da, db, d, accumulate);
  } else {
    wgmma_m64k32_ss_int8<kN, is_same_v<TA, uint8_t>, is_same_v<TB, uint8_t>>(da, db, d, accumulate);
  }
}

// wgmma's k32 A fragment of 8-bit elements (wgmma_m64k32_rs_fp8) from the same 32 columns of a
// 64-row tile in the accumulator's order, `in`: word j holds atom j's four elements (row0 and row0 + 8,
// columns 8j + 2q and 8j + 2q + 1, q = lane % 4) -- a cast accumulator as it stands. The A fragment
// wants columns 4q .. 4q + 3 of each 16 in one word: each thread packs one row's pairs of two atoms
// into a word, and the lane that needs them takes the half it needs from its quad's two owners.
TL_DEVICE void a8_fragment_from_accumulator_order(const uint32_t (&in)[4], uint32_t (&out)[4]) {
  const uint32_t q = threadIdx.x % 4, owner = (threadIdx.x % 32) - q + 2 * (q % 2);
  const uint32_t pick = q < 2 ? 0x5410u : 0x7632u;  // low pairs (the first atom of the 16 columns) or high
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int row8 = 0; row8 < 2; ++row8) {
      const uint32_t mine = __byte_perm(in[2 * half], in[2 * half + 1], row8 ? 0x7632u : 0x5410u);
      const uint32_t lo = __shfl_sync(0xffffffffu, mine, owner), hi = __shfl_sync(0xffffffffu, mine, owner + 1);
      out[2 * half + row8] = __byte_perm(lo, hi, pick);
    }
}

// One m64 x kN instruction of a gemm reading A from registers, by input type: 16-bit k16 (the
// fragment as it stands), 8-bit floats or integers k32 (reordered by a8_fragment_from_accumulator_order).
template <class TA, class TB, int kN, bool kTransB, class Acc>
TL_DEVICE void wgmma_rs_step(const uint32_t (&a)[4], uint64_t db, Acc (&d)[kN / 2], bool accumulate) {
  if constexpr (sizeof(TA) == 2) {
    wgmma_m64k16_rs<TA, kN, !kTransB>(a, db, d, accumulate);
  } else if constexpr (is_same_v<Acc, float>) {
    wgmma_m64k32_rs_fp8<kN, is_same_v<TA, float8_e5m2_t>, is_same_v<TB, float8_e5m2_t>>(a, db, d, accumulate);
  } else {
    wgmma_m64k32_rs_int8<kN, is_same_v<TA, uint8_t>, is_same_v<TB, uint8_t>>(a, db, d, accumulate);
  }
}

// After a gemm's instructions: one group, waited for as kPending says (tile_gemm_wgmma).
template <int kPending, int kRegs, class Acc>
TL_DEVICE void wgmma_finish(Acc (&d)[kRegs]) {
  wgmma_commit_group();
  if constexpr (kPending >= 0) {
    wgmma_wait_group<kPending>();
    fence_accumulators(d);
  }
}

}  // namespace detail

// acc (=|+=) opA(A) * opB(B) over kK (a multiple of 16, of 32 for 8-bit inputs): A is M x K (K x M
// when kTransA), B is K x N (N x K when kTransB), as kRowsA x kLda and kRowsB x kLdb swizzled tiles
// starting at a row that is a multiple of 8 and at column 0. M = kAtomsM * 64 * warpgroups, N =
// kCols. B's element type TB (8-bit: may differ from A's) and the accumulator's (float, or int32_t
// for integers) come from the arguments. All threads of the block call it.
template <class T, bool kTransA, bool kTransB, int kAtomsM, int kCols, int kK, int kLda, int kRowsA, int kLdb, int kRowsB, int kPending = 0,
          class TB = T, class Acc = float>
TL_DEVICE void tile_gemm_wgmma(const T* A, const TB* B, Acc* acc, bool clear) {
  constexpr int kInstN = wgmma_instruction_n(kCols);
  constexpr int kStepK = sizeof(T) == 1 ? 32 : 16;
  static_assert(sizeof(T) == sizeof(TB) && (sizeof(T) == 2 ? is_same_v<T, TB> && is_same_v<Acc, float> : sizeof(T) == 1),
                "wgmma tiles: 16-bit inputs of one type into float, or 8-bit inputs");
  static_assert(sizeof(T) == 2 || (!kTransA && kTransB), "8-bit wgmma operands are K-major: A [M, K], B [N, K]");
  static_assert(kInstN > 0 && kK % kStepK == 0, "wgmma tiles: N a multiple of 8, K of 16 (of 32 for 8-bit inputs)");
  static_assert(kTransB || kInstN % 64 == 0, "an N-major B is read in whole 64-column panels");
  constexpr int kRegs = kAtomsM * kCols / 2;
  using OpA = WgmmaOperand<kLda, kRowsA, int(sizeof(T))>;
  using OpB = WgmmaOperand<kLdb, kRowsB, int(sizeof(TB))>;
  Acc(&d)[kRegs] = *reinterpret_cast<Acc(*)[kRegs]>(acc);
  const int m0 = int(threadIdx.x / 128) * kAtomsM * 64;
  uint64_t a0;  // A's origin (this warpgroup's rows)
  if constexpr (kTransA) a0 = OpA::mn_major(A, 0, m0);
  else a0 = OpA::k_major(A, m0, 0);
  const uint64_t b0 = detail::wgmma_b_origin<kTransB, kLdb, kRowsB>(B);
  fence_accumulators(d);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < kK; k += kStepK)
#pragma unroll
    for (int am = 0; am < kAtomsM; ++am) {
      const uint64_t da = kTransA ? OpA::at(a0, k, am * 64) : OpA::at(a0, am * 64, k);
#pragma unroll
      for (int n = 0; n < kCols; n += kInstN) {
        const uint64_t db = kTransB ? OpB::at(b0, n, k) : OpB::at(b0, k, n);
        Acc(&dn)[kInstN / 2] = *reinterpret_cast<Acc(*)[kInstN / 2]>(d + am * kCols / 2 + n / 2);
        detail::wgmma_ss_step<T, TB, kInstN, kTransA, kTransB>(da, db, dn, !(clear && k == 0));
      }
    }
  detail::wgmma_finish<kPending>(d);
}

// The same with A from registers: `a` is this thread's M x kK fragment in the accumulator layout
// (a cast accumulator of kK columns). 16-bit elements: each 64-row tile's k16 step is the four
// registers (eight elements) of its two 8-column blocks, wgmma_m64k16_rs's A fragment as it stands.
// 8-bit elements (K-major B of 8-bit elements, accumulator as in tile_gemm_wgmma): each k32 step's
// four registers are reordered into wgmma's A fragment first (shuffles within quads of lanes).
// The registers are pinned before the wgmma fence (written before it, as wgmma requires) and must
// not be written again until a wait covers the gemm (passes/wgmma_waits.h counts them as its operand).
template <class T, bool kTransB, int kAtomsM, int kCols, int kK, int kLdb, int kRowsB, int kPending = 0, class TB = T, class Acc = float>
TL_DEVICE void tile_gemm_wgmma_rs(T* a, const TB* B, Acc* acc, bool clear) {
  constexpr int kInstN = wgmma_instruction_n(kCols);
  constexpr int kStepK = sizeof(T) == 1 ? 32 : 16;
  static_assert(sizeof(T) == sizeof(TB) && (sizeof(T) == 2 ? is_same_v<T, TB> && is_same_v<Acc, float> : sizeof(T) == 1),
                "wgmma tiles: 16-bit inputs of one type into float, or 8-bit inputs");
  static_assert(sizeof(T) == 2 || kTransB, "8-bit wgmma operands are K-major: B [N, K]");
  static_assert(kInstN > 0 && kK % kStepK == 0, "wgmma tiles: N a multiple of 8, K of 16 (of 32 for 8-bit inputs)");
  static_assert(kTransB || kInstN % 64 == 0, "an N-major B is read in whole 64-column panels");
  constexpr int kRegs = kAtomsM * kCols / 2, kWordsA = kAtomsM * kK * int(sizeof(T)) / 8;
  using OpB = WgmmaOperand<kLdb, kRowsB, int(sizeof(TB))>;
  Acc(&d)[kRegs] = *reinterpret_cast<Acc(*)[kRegs]>(acc);
  uint32_t(&ra)[kWordsA] = *reinterpret_cast<uint32_t(*)[kWordsA]>(a);
  const uint64_t b0 = detail::wgmma_b_origin<kTransB, kLdb, kRowsB>(B);
  // 8-bit elements: the whole fragment reordered before the wgmma fence (a register written after
  // it makes ptxas fence again before the wgmma that reads it).
  uint32_t reordered[sizeof(T) == 1 ? kWordsA : 1];
  if constexpr (sizeof(T) == 1) {
#pragma unroll
    for (int w = 0; w < kWordsA; w += 4)
      detail::a8_fragment_from_accumulator_order(*reinterpret_cast<const uint32_t(*)[4]>(ra + w), *reinterpret_cast<uint32_t(*)[4]>(reordered + w));
  }
  uint32_t(&words)[kWordsA] = *reinterpret_cast<uint32_t(*)[kWordsA]>(sizeof(T) == 1 ? reordered : ra);
  fence_accumulators(d);
  fence_register_tile<kWordsA>(words);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < kK; k += kStepK)
#pragma unroll
    for (int am = 0; am < kAtomsM; ++am) {
      const uint32_t(&ak)[4] = *reinterpret_cast<const uint32_t(*)[4]>(words + (am * kK + k) * int(sizeof(T)) / 8);
#pragma unroll
      for (int n = 0; n < kCols; n += kInstN) {
        const uint64_t db = kTransB ? OpB::at(b0, n, k) : OpB::at(b0, k, n);
        Acc(&dn)[kInstN / 2] = *reinterpret_cast<Acc(*)[kInstN / 2]>(d + am * kCols / 2 + n / 2);
        detail::wgmma_rs_step<T, TB, kInstN, kTransB>(ak, db, dn, !(clear && k == 0));
      }
    }
  detail::wgmma_finish<kPending>(d);
}

}  // namespace tl::cuda
