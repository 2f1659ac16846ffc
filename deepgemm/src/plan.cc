#include "plan.h"

#include <cstdio>

#include "rt/error.h"
#include "tl/device/round_sync_plan.h"

namespace deepgemm::detail {

Sm90Plan plan_sm90(const Sm90Facts& f) {
  const std::string& fn = f.function;
  const int out_bytes = f.out_bytes();
  const int sfb_rows = f.sfb_rows();
  const int64_t m_hint = f.m_hint();
  // TMA stores whole 16-byte pieces of a row: where a row of D ends inside one (N % 8 != 0), the
  // rest of that piece -- D's row padding, or the next columns of a column slice -- got zeros (found
  // on the H200 by GpuFuzz). Such rows go out by direct stores.
  const bool tma_store_ok = f.out == rt::DType::BF16 && f.d_aligned16 && (f.n * 2) % 16 == 0;
  // The contiguous layout's groups start on 128-row boundaries: a 256-row tile spans two 128-row
  // blocks and takes a second B tile per stage for when their experts differ (sm90_dual_b; not for
  // per-row B scales, which FP4 B has); 192 rows could span three.
  const bool contiguous = f.grouping == Grouping::MContiguous;
  const int max_block_m = !contiguous || sfb_rows == 0 ? 256 : 128;
  const bool plain_fp8 = f.fp8 && f.grouping == Grouping::None && !f.sfb_per_row;
  // Multicast (DG_GPU_CONFIG=...x2 only) needs every tile of the grid (no grouping) and B's scales
  // read directly.
  const bool multicast_ok = f.grouping == Grouping::None && !f.sfb_per_row && f.cluster_launch;
  const std::string& forced = f.knobs.config;
  // FP4 B: expanded in registers (kernels/sm90_fp4_gemm.cuh) or into shared memory (kernels/sm90_gemm.cuh),
  // by sm90_fp4_in_registers unless DG_GPU_FP4 says (auto, registers, shared); DG_GPU_CONFIG forces a
  // configuration of the shared-memory form. DG_GPU_FP4=registers:BMxBN forces the registers
  // kernel's tile (BM rows of A, BN of B), with a trailing "i" on two k-interleaved consumers.
  const std::string fp4_form = f.fp4_b ? f.knobs.fp4 : std::string("auto");
  int fp4_bm = 0, fp4_bn = 0;
  bool fp4_ki = false;
  if (fp4_form.rfind("registers:", 0) == 0) {
    char tail = 0, extra = 0;
    const int got = std::sscanf(fp4_form.c_str() + 10, "%dx%d%c%c", &fp4_bm, &fp4_bn, &tail, &extra);
    fp4_ki = got == 3 && tail == 'i';
    RT_USER_CHECK(got == 2 || fp4_ki, "deepgemm::", fn, ": DG_GPU_FP4='", fp4_form,
                  "': expected registers:BMxBN or registers:BMxBNi, e.g. registers:64x128");
    const std::string why = fp4_register_tile_error(fp4_bm, fp4_bn, f.promotion_k, contiguous, fp4_ki);
    RT_USER_CHECK(why.empty(), "deepgemm::", fn, ": DG_GPU_FP4='", fp4_form, "': ", why);
  } else {
    RT_USER_CHECK(fp4_form == "auto" || fp4_form == "registers" || fp4_form == "shared", "deepgemm::", fn,
                  ": DG_GPU_FP4='", fp4_form, "' must be 'auto', 'registers', 'registers:BMxBN[i]' or 'shared'");
  }
  Sm90Plan plan;
  plan.fp4_registers =
      f.fp4_b && forced.empty() && (fp4_form == "auto" ? sm90_fp4_in_registers(m_hint) : fp4_form != "shared");
  GpuBlocking& blk = plan.blocking;
  if (!forced.empty()) {
    blk = forced_blocking(fn, forced, f.fp8, f.sfb_per_row, m_hint, f.n, f.groups_a, out_bytes, tma_store_ok, f.sms,
                          f.smem_limit, sfb_rows, multicast_ok, max_block_m, f.fp4_b, contiguous,
                          f.grouping != Grouping::None);
  } else if (plan.fp4_registers) {
    blk = choose_fp4_register_blocking(m_hint, f.n, f.groups_a, f.sms, f.smem_limit, f.promotion_k, contiguous, fp4_bm,
                                       fp4_bn, fp4_ki);
  } else {
    blk = choose_gpu_blocking(f.fp8, m_hint, f.n, f.k, f.groups_a, out_bytes, tma_store_ok, f.sms, f.smem_limit,
                              sfb_rows, max_block_m, f.fp4_b, plain_fp8, contiguous);
  }
  if (!plan.fp4_registers) choose_whole_slice_epilogue(blk, f.fp8, f.k, out_bytes, sfb_rows, f.smem_limit);

  // Split-K for plain GEMMs whose tiles leave SMs idle (tl/device/split_k.h): the last wave's tiles
  // are cut into pieces of K, one per CTA, that sum their partials in the kernel (deterministically).
  // DG_GPU_SPLIT_K forces it.
  const bool split_ok = f.grouping == Grouping::None && f.k > 0 && blk.multicast == 1 && !plan.fp4_registers;
  const int64_t forced_split = f.knobs.split_k;
  const int64_t k_blocks = (f.k + blk.block_k - 1) / blk.block_k;
  RT_USER_CHECK(forced_split <= 1 || (split_ok && forced_split <= k_blocks), "deepgemm::", fn, ": DG_GPU_SPLIT_K=",
                forced_split, " needs a plain GEMM (no grouping, no multicast) with at least that many blocks of ",
                blk.block_k, " in K (", k_blocks, " here)");
  if (split_ok) {
    plan.split_k = tl::plan_split_k(int(sm90_tiles(blk, f.m, f.n, 1)), int(k_blocks), f.sms, int(forced_split));
    if (plan.split_k.splits > 1) {
      blk.splits = plan.split_k.splits;
      blk.grid = plan.split_k.grid;
    }
  }

  // Plain GEMMs of several rounds whose operands outgrow L2 keep their CTAs in step
  // (sm90_round_sync_every). DG_GPU_ROUND_SYNC: the rule, never, or a barrier every R rounds
  // wherever one can apply.
  const bool plain = f.grouping == Grouping::None && !plan.fp4_registers;  // (no round barriers there)
  const int64_t forced_sync = f.knobs.round_sync;
  RT_USER_CHECK(forced_sync >= -1 && forced_sync <= 1000000, "deepgemm::", fn, ": DG_GPU_ROUND_SYNC='", forced_sync,
                "' must be auto, 0 or a number of rounds between barriers");
  const int64_t operand_bytes = (f.m * f.k * f.a_bits + f.n * f.k * f.b_bits) / 8;
  plan.round_sync_every = forced_sync < 0 ? sm90_round_sync_every(blk, plain, f.m, f.n, f.k, operand_bytes, f.l2_bytes)
                          : sm90_round_sync_ok(blk, plain, f.m, f.n) ? int(forced_sync)
                                                                     : 0;
  // A barrier happens in a round after the first, round_sync_every apart.
  plan.round_sync = tl::round_sync_barriers(sm90_full_rounds(blk, f.m, f.n), plan.round_sync_every) > 0;

  // FP4 B with UE8M0 scales per 32 of K: the kernel may fold them into the expanded values against
  // each row's largest of a k-block and promote every 128 of K (layout_copy.cuh). Folding pays on
  // tiles of 128 or more columns (H200, 4096 rows: +24-30%); on the narrow tiles of the M <= 128
  // shapes one thread per row expands too slowly (-27% to -41%): docs/perf.md.
  plan.fold_scales =
      f.fp4_b && f.promotion_k == 32 && f.sfb_ue8m0 && blk.block_n >= 128 && !plan.fp4_registers;
  plan.ring_rounds =
      !plan.fp4_registers && sm90_ring_rounds(blk, f.fp8, m_hint, f.n, f.k, f.groups_a, sfb_rows);
  return plan;
}

Sm90KernelSpec sm90_kernel_spec(const Sm90Facts& f, const Sm90Plan& plan) {
  const GpuBlocking& blk = plan.blocking;
  Sm90KernelSpec spec;
  spec.fp8 = f.fp8;
  spec.out = f.out;
  spec.block_m = blk.block_m;
  spec.block_n = blk.block_n;
  spec.stages = blk.stages;
  spec.grouping = f.grouping == Grouping::MContiguous ? 1 : f.grouping == Grouping::MMasked ? 2 : 0;
  spec.has_c = f.has_c;
  spec.tma_store = blk.tma_store;
  spec.epilogue_buffers = blk.epilogue_buffers;
  spec.epilogue_whole_slice = blk.epilogue_whole_slice;
  spec.fp4_b = f.fp4_b;
  spec.fp4_registers = plan.fp4_registers;
  spec.fold_scales = plan.fold_scales;
  spec.sfb_per_row = f.sfb_per_row;
  spec.promotion_k = f.promotion_k;
  spec.multicast = blk.multicast;
  spec.k_interleave = blk.k_interleave;
  spec.ring_rounds = plan.ring_rounds;
  spec.smem_bytes = blk.smem_bytes;
  return spec;
}

}  // namespace deepgemm::detail
