// mbarrier: the shared-memory barrier object that TMA loads complete on, and the producer/consumer
// ring built from pairs of them.
//
// Why: on Hopper, data arrives in shared memory asynchronously (TMA), and the only way to learn
// that it has arrived is an mbarrier whose transaction count the copy engine decrements. The same
// object, with plain arrivals, tells the producer that a stage is free again. One header keeps the
// phase-parity rules in one place:
//   - A barrier counts arrivals (set at init) and, optionally, transaction bytes (expect_tx).
//     When both reach zero the current phase completes and the next one begins.
//   - try_wait.parity(P) succeeds once the phase with parity P has completed. A fresh barrier is in
//     phase 0, so waiting for parity 1 succeeds at once ("the phase before the first").
//   - Ring of N stages: stage i has a `full` barrier (producer -> consumers: count 1 + tx bytes)
//     and an `empty` barrier (consumers -> producer: count = arrivals per release). The producer
//     waits `empty` with parity phase^1, the consumers wait `full` with parity phase, and both flip
//     their phase when the stage index wraps (PipelineState).
//
// Bounded waits: define TL_CUDA_WAIT_TIMEOUT_NS (e.g. 4000000000 for 4 s) to make every wait trap
// (the launch then fails with an error on the host) instead of hanging forever when a protocol bug
// loses an arrival; off by default (the check costs a timer read per failed try_wait).
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

// One 8-byte mbarrier object in shared memory.
using mbarrier_t = uint64_t;

TL_DEVICE void mbarrier_init(mbarrier_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// Plain arrival (release semantics at CTA scope); `bar` as a shared-memory address or a pointer.
TL_DEVICE void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
TL_DEVICE void mbarrier_arrive(mbarrier_t* bar) { mbarrier_arrive(smem_addr(bar)); }

// Arrival on the barrier of CTA `cta_rank` of the cluster at the same shared-memory offset (the
// consumer side of TMA multicast: every CTA that received the data frees the stage in every
// sender). Default semantics (release at CTA scope), as CUTLASS's cluster barriers use: the arrival
// only has to follow this thread's completed reads of the stage; a cluster-scope release would
// fence far more on every stage.
TL_DEVICE void mbarrier_arrive_cluster(mbarrier_t* bar, uint32_t cta_rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cta_rank)
      : "memory");
}

// Arrival that also announces `bytes` of incoming transactions (the producer, before or after it
// issues the TMA copies that complete on this barrier).
TL_DEVICE void mbarrier_arrive_expect_tx(mbarrier_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Announces `bytes` more transactions without arriving.
TL_DEVICE void mbarrier_expect_tx(mbarrier_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// One non-blocking-ish probe (the hardware may suspend the thread briefly): true once the phase
// with parity `parity` has completed. Acquire semantics at CTA scope. `bar`: the barrier's
// shared-memory address (smem_addr).
TL_DEVICE bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Blocks until the phase with parity `parity` has completed.
TL_DEVICE void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
#if defined(TL_CUDA_WAIT_TIMEOUT_NS)
  if (mbarrier_try_wait_parity(bar, parity)) return;
  const uint64_t start = globaltimer_ns();
  while (!mbarrier_try_wait_parity(bar, parity)) {
    // No printf here: a call inside the wgmma pipeline makes ptxas serialize every wgmma (C7510).
    if (globaltimer_ns() - start > uint64_t(TL_CUDA_WAIT_TIMEOUT_NS)) __trap();
  }
#else
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
#endif
}
TL_DEVICE void mbarrier_wait_parity(mbarrier_t* bar, uint32_t parity) { mbarrier_wait_parity(smem_addr(bar), parity); }

// ---------------------------------------------------------------------------------------------
// Position in an N-stage ring: the stage index and the phase parity of the current lap.
template <int kStages>
struct PipelineState {
  static_assert(kStages >= 1, "at least one stage");
  uint32_t index = 0;
  uint32_t phase = 0;

  TL_DEVICE void advance() {
    if (++index == uint32_t(kStages)) {
      index = 0;
      phase ^= 1u;
    }
  }
};

// The full/empty barrier pairs of an N-stage TMA ring. The barriers live in shared memory (2 *
// kStages objects); this struct only holds their address and is cheap to copy.
template <int kStages>
struct TmaPipeline {
  mbarrier_t* full;   // [kStages]: producer's arrive_expect_tx + TMA bytes -> consumers
  mbarrier_t* empty;  // [kStages]: consumers' releases -> producer

  // `consumer_arrivals`: how many mbarrier_arrive calls free one stage (e.g. one per consumer warp).
  // Call from one thread, then fence_barrier_init() and a block-wide sync before first use.
  TL_DEVICE void init(uint32_t consumer_arrivals) const {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], consumer_arrivals);
    }
  }
  // Producer: wait until stage st.index may be overwritten.
  TL_DEVICE void producer_acquire(const PipelineState<kStages>& st) const {
    mbarrier_wait_parity(&empty[st.index], st.phase ^ 1u);
  }
  // Producer: announce the bytes the TMA copies of this stage will deliver (one arrival).
  TL_DEVICE void producer_expect(const PipelineState<kStages>& st, uint32_t bytes) const {
    mbarrier_arrive_expect_tx(&full[st.index], bytes);
  }
  TL_DEVICE mbarrier_t* full_barrier(const PipelineState<kStages>& st) const { return &full[st.index]; }
  // Consumer: wait until the data of stage st.index has landed.
  TL_DEVICE void consumer_wait(const PipelineState<kStages>& st) const {
    mbarrier_wait_parity(&full[st.index], st.phase);
  }
  // Consumer: one arrival freeing stage `index` (after every read of it has completed).
  TL_DEVICE void consumer_release(uint32_t index) const { mbarrier_arrive(&empty[index]); }
};

}  // namespace tl::cuda
