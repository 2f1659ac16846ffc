// TMA (the Tensor Memory Accelerator, "bulk tensor copy"): tile copies between global and shared
// memory described by a tensor map, issued by one thread and completed asynchronously.
//
// Why: one instruction moves a whole 2-D/3-D box (up to 256 rows), applies the 128-byte swizzle
// that wgmma wants, zero-fills what lies outside the tensor (ragged M/N/K edges need no masking on
// loads) and reports completion to an mbarrier in bytes. The issuing thread is free immediately, so
// one producer thread keeps a multi-stage ring full.
//
// The tensor map (CUtensorMap, 128 bytes, 64-byte aligned) is built on the host with
// cuTensorMapEncodeTiled; device code sees it only as the opaque TmaDescriptor below, passed as a
// `const __grid_constant__ TmaDescriptor` kernel parameter (so its address is a parameter-space
// address the TMA unit can read, and no copy to global memory is needed). Coordinates are in
// elements, innermost dimension first, and may be negative or past the end (out-of-bounds elements
// read as zero; stores skip them). The mbarrier receives the FULL box size in bytes even when part
// of the box is out of bounds.
//
// Requirements from the hardware (checked by cuTensorMapEncodeTiled on the host): global address
// 16-byte aligned, every stride but the innermost a multiple of 16 bytes (for 2-byte elements: the
// row length a multiple of 8 elements), box sides <= 256 elements, and with 128-byte swizzle the
// inner box side * element size <= 128 bytes; the shared-memory destination 128-byte aligned
// (1024-byte aligned for the 128-byte swizzle pattern to line up with wgmma's).
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/mbarrier.h"

namespace tl::cuda {

// Same size and alignment as the driver's CUtensorMap; the contents are the driver's business.
struct alignas(64) TmaDescriptor {
  uint64_t opaque[16];
};
static_assert(sizeof(TmaDescriptor) == 128, "CUtensorMap is 128 bytes");

// Pulls the descriptor into the TMA unit's cache ahead of the first copy (one thread, at kernel start).
TL_DEVICE void tma_prefetch_descriptor(const TmaDescriptor* desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(desc)) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Loads: global -> shared, completing on `bar` (complete_tx of the box's bytes).
TL_DEVICE void tma_load_2d(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

TL_DEVICE void tma_load_3d(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

TL_DEVICE void tma_load_1d(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];" ::"r"(smem_addr(smem_dst)),
               "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "r"(c0)
               : "memory");
}
TL_DEVICE void tma_load_4d(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
TL_DEVICE void tma_load_5d(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Multicast: one load lands at the same shared-memory offset in every CTA of `cta_mask` (bit i =
// cluster CTA rank i) and completes on the barrier at `bar`'s offset in each of them. Each receiving
// CTA's full barrier must expect the bytes of every multicast it receives.
TL_DEVICE void tma_load_3d_multicast(void* smem_dst, const TmaDescriptor* desc, mbarrier_t* bar, int c0, int c1, int c2,
                                     uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%4, %5, %6}], [%2], %3;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---------------------------------------------------------------------------------------------
// Stores: shared -> global, tracked by bulk async-groups of the issuing thread. The writers of the
// shared tile must fence_proxy_async_shared() and synchronize with the issuing thread first.
TL_DEVICE void tma_store_2d(const TmaDescriptor* desc, const void* smem_src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
TL_DEVICE void tma_store_3d(const TmaDescriptor* desc, const void* smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
TL_DEVICE void tma_store_4d(const TmaDescriptor* desc, const void* smem_src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
TL_DEVICE void tma_store_5d(const TmaDescriptor* desc, const void* smem_src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
               : "memory");
}
// Closes the group of stores issued so far by this thread.
TL_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most kPending groups still READ shared memory (the source may then be reused).
template <int kPending>
TL_DEVICE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Waits until at most kPending groups are incomplete (writes visible in global memory).
template <int kPending>
TL_DEVICE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace tl::cuda
