// Buffer: expert-parallel dispatch and combine with DeepEP's semantics, on CPU tensors, or on CUDA
// tensors with a device plane (CommOptions::cuda_device; normal mode only).
//
// Normal mode (training, prefill):
//   layout = buffer.get_dispatch_layout(topk_idx, num_experts);              // local
//   auto d = buffer.dispatch({.x = x, .topk_idx = topk_idx, .topk_weights = w, .num_experts = E, .layout = &layout});
//   ... experts on d.recv_x (rows grouped by source rank, each source's tokens in order) ...
//   auto c = buffer.combine(y, *d.handle, d.recv_topk_weights);              // back at the source
// A token goes at most once to each rank that holds one of its experts (expert e lives on rank
// e / (num_experts / size)). Received top-k indices are the rank's local expert numbers, -1 where the
// expert is elsewhere (its weight is 0 there). combine returns to each source token the sum, over
// the ranks it was sent to, of the rows those ranks pass in (accumulated in f32 in rank order), and
// the sum of the weights passed in (which restores the original top-k weights): applying the experts
// and their weights before combine gives the top-k-weighted sum of the expert outputs.
//
// Low-latency mode (decoding): low_latency_dispatch sends each token once per selected expert into a
// fixed [local_experts, size * max_tokens, hidden] layout, rows of each expert packed from 0 in
// (source rank, token) order, with per-expert counts; low_latency_combine returns the top-k-weighted
// sum. With return_recv_hook the call issues all its sends at once (the rings hold them; see
// low_latency_size_hint) and returns; the hook completes this rank's receive without waiting for the
// other ranks' hooks. The rank's own sends are acknowledged inside its next call on the Buffer.
//
// FP8: e4m3 data with one f32 scale per 128 channels ([tokens, hidden / 128], dequantized value =
// e4m3 * scale). Normal dispatch moves FP8 given by the caller; low_latency_dispatch with use_fp8
// quantizes BF16 input: scale = max(amax, 1e-4) / 448 per 128-channel block.
//
// Calls on CPU tensors, and dispatch and combine on the nccl device plane, are synchronous (the
// returned Event is complete). On the cuda_ipc plane dispatch and combine of CUDA tensors run on
// the Buffer's communication stream (a private stream of the device plane):
// with previous_event that stream first waits for it (say, an Event::record on the stream computing
// the inputs); with async_finish the call returns once its kernels are queued and its Event
// completes with them (event.stream_wait(stream) orders a stream of the caller after it), else the
// call waits and its Event is complete. One low-latency receive may be pending (hook not called yet)
// per Buffer: any other call on the Buffer completes it first. On the GPU the kernels signal each
// other through the device windows (no host barrier); a hook's call has only launched the send
// kernel. Low-latency calls on the GPU can instead be queued on a stream (set_low_latency_stream),
// without any host step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepep/comm.h"
#include "deepep/event.h"
#include "rt/cuda_driver.h"
#include "rt/tensor.h"

namespace deepep {

class Group;
namespace detail {
class SharedArena;
struct InternodeRoute;
}

struct DispatchLayout {
  rt::Tensor num_tokens_per_rank;       // [size] int32: tokens with at least one expert on the rank
  rt::Tensor num_tokens_per_rdma_rank;  // [num_nodes] int32: the same per node
  rt::Tensor num_tokens_per_expert;     // [num_experts] int32
  rt::Tensor is_token_in_rank;          // [tokens, size] bool
};

// What combine (and a cached dispatch) needs from a dispatch. Immutable; reusable any number of times.
struct DispatchHandle {
  uint64_t id = 0;            // same on every rank for the same dispatch
  int num_ranks = 0;
  int64_t num_tokens = 0;     // tokens this rank sent from
  int64_t num_recv_tokens = 0;
  int64_t hidden = 0;
  int num_topk = 0;
  rt::Tensor is_token_in_rank;    // [num_tokens, size] bool, on the dispatch's device
  rt::Tensor rank_prefix_matrix;  // [size, size] int32 (CPU): [i][j] = tokens ranks 0..i sent to rank j
  rt::Tensor recv_src_idx;        // [num_recv_tokens] int32: index of each received token at its source
  std::vector<int64_t> recv_counts;            // tokens received from each rank
  // CPU dispatches only (empty for GPU ones, whose routing stays on the device; the nccl plane's on
  // the hierarchical route keep send_lists for combine):
  std::vector<std::vector<int32_t>> send_lists;  // per destination rank: token indices, in order
  std::vector<int64_t> token_offset;  // per token: first staging row in combine (size num_tokens + 1)
  // GPU dispatches only: [num_tokens, size] int32 on the device, the position of token t among the
  // tokens sent to rank r, in token order (-1 when t did not go to r); the device combine reduces by it.
  rt::Tensor device_slots;
  // GPU dispatches only: [size, num_tokens] int32 on the device, the tokens sent to rank r in order
  // (the first of them for r's count); a cached dispatch's scatter (nccl plane: gather) walks it.
  rt::Tensor device_order;
  // GPU dispatches only: int64 on the device, [0, size) the tokens sent to each rank, [size, 2 size)
  // those received from each (then scratch of the routing; the nccl plane's has the first part
  // only); the kernels place rows by them.
  rt::Tensor device_counts;
  // GPU dispatches only: the device transport that moved it ("cuda_ipc" or "nccl",
  // CommOptions::device_transport); its handle serves only calls on that plane.
  std::string device_transport;
  // Dispatches that took the hierarchical route (CPU or nccl plane, a group of several nodes): which tokens went
  // to each node and what this rank forwarded inside its node (buffer/internode.h); null otherwise.
  std::shared_ptr<const detail::InternodeRoute> internode;
};

struct DispatchArgs {
  rt::Tensor x;             // [tokens, hidden]: bf16 (also f16, f32), or f8e4m3 with x_scales
  rt::Tensor x_scales;      // [tokens, hidden / 128] f32, required with f8e4m3 x
  rt::Tensor topk_idx;      // [tokens, k] int64 (or int32); -1: no expert
  rt::Tensor topk_weights;  // [tokens, k] f32; optional
  int num_experts = 0;
  const DispatchLayout* layout = nullptr;  // from get_dispatch_layout; computed from topk_idx when null
  // Cached mode: reuse a previous dispatch's routing (same tokens); only x (and x_scales) move and
  // topk_idx / topk_weights / layout must be left empty.
  std::shared_ptr<const DispatchHandle> handle;
  int expert_alignment = 1;  // num_recv_tokens_per_expert is rounded up to a multiple of it
  // CUDA tensors: the communication stream waits for this event before reading the inputs (CPU
  // tensors, and CUDA tensors on the nccl plane, whose calls are synchronous: the host waits for
  // it). A default Event is complete: no wait.
  Event previous_event;
  // CUDA tensors: return once the work is queued; the result's event completes with it. Inputs are
  // kept alive until then; outputs are written by then (read them after event.wait() or on a stream
  // after event.stream_wait()). A non-cached dispatch still waits on the host for its routing
  // counts (they size the outputs), which come after the stream's earlier work. No effect on CPU
  // tensors or on the nccl plane (their calls are synchronous: NCCL's waits are bounded on the host).
  bool async_finish = false;
};

struct DispatchResult {
  rt::Tensor recv_x;             // [recv, hidden], x's dtype
  rt::Tensor recv_x_scales;      // [recv, hidden / 128] f32 (FP8 only)
  rt::Tensor recv_topk_idx;      // [recv, k] int64, local expert or -1 (not in cached mode)
  rt::Tensor recv_topk_weights;  // [recv, k] f32, 0 where the index is -1 (when weights were given)
  std::vector<int> num_recv_tokens_per_expert;  // per local expert (not in cached mode)
  std::shared_ptr<const DispatchHandle> handle;
  Event event;
};

struct CombineResult {
  rt::Tensor combined_x;             // [tokens, hidden], x's dtype
  rt::Tensor combined_topk_weights;  // [tokens, k] f32 when topk_weights were given
  Event event;
};

// What dispatch and combine of CPU tensors sent from this rank to ranks of other nodes, counted
// since the Buffer was created. The hierarchical route sends a token once per destination node (a
// combine: one reduced row per token and node); the flat one once per destination rank.
struct InternodeTraffic {
  int64_t dispatch_rows = 0;  // token records sent by dispatch
  int64_t combine_rows = 0;   // rows sent back by combine (hierarchical: a partial per token and node)
  int64_t bytes = 0;          // the payload bytes of both, as handed to the frames
};

struct LowLatencyHandle {
  uint64_t id = 0;
  int num_ranks = 0;
  int num_experts = 0;
  int max_tokens_per_rank = 0;
  int64_t hidden = 0;
  int64_t num_tokens = 0;  // tokens this rank sent
  int num_topk = 0;
  // On the dispatch's device (GPU dispatches: on the GPU).
  rt::Tensor recv_src_info;     // [local_experts, size * max_tokens] int32: source token index of each row (-1 past the count)
  rt::Tensor recv_layout_range; // [local_experts, size] int64: (begin << 32) | count per source rank
  rt::Tensor topk_idx;          // this rank's [num_tokens, k] int64 routing (a copy)
  std::vector<int32_t> counts;  // CPU dispatches: [size][num_experts], tokens rank r sends to expert e
  // GPU dispatches: [local_experts, size * max_tokens] int32, each row's top-k slot at its source
  // (token * k + position; -1 past the count): where combine sends the row back.
  rt::Tensor recv_src_slot;
};

struct LowLatencyDispatchResult {
  rt::Tensor recv_x;         // [local_experts, size * max_tokens, hidden] bf16, or f8e4m3 with scales
  rt::Tensor recv_x_scales;  // [local_experts, size * max_tokens, hidden / 128] f32 (use_fp8)
  rt::Tensor recv_count;     // [local_experts] int32
  std::shared_ptr<const LowLatencyHandle> handle;
  Event event;
  std::function<void()> hook;  // with return_recv_hook: completes the receive (idempotent)
};

struct LowLatencyCombineResult {
  rt::Tensor combined_x;  // [tokens, hidden] bf16
  Event event;
  std::function<void()> hook;
};

class Buffer {
 public:
  // Collective over the group. On one host the shm transport carries all traffic: its rings get
  // num_nvl_bytes + num_rdma_bytes per rank (DeepEP's LL users size num_rdma_bytes with
  // low_latency_size_hint). Ranks must agree on the sizes and the mode (checked).
  Buffer(std::shared_ptr<Group> group, int64_t num_nvl_bytes, int64_t num_rdma_bytes = 0, bool low_latency_mode = false,
         CommOptions options = {});
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  int rank() const;
  int size() const;
  bool low_latency_mode() const { return low_latency_mode_; }
  // Whether dispatch and combine of CPU tensors read peers' rows straight from their memory (one
  // copy: cross-memory attach) rather than through the shm transport's frames (two copies). Decided
  // at creation: every rank must be able to read every other, no frame faults may be injected
  // (drop, corrupt, delay act on frames), and DEEPEP_SINGLE_COPY must not be 0.
  bool single_copy() const { return !peer_pids_.empty(); }
  // Whether dispatch and combine of CPU tensors take the hierarchical route: the group spans
  // several nodes (Group::num_nodes) and DEEPEP_HIERARCHICAL_DISPATCH is not 0 (ranks must agree).
  // A token then crosses to another node once, to its forwarder there (the rank with the sender's
  // local index), which hands it to the ranks of its node that need it; combine reduces each
  // node's rows at the forwarder and sends one row per token back. A group spanning nodes never
  // takes the single copy (ranks of other hosts cannot read each other's memory).
  bool hierarchical() const { return hierarchical_; }
  InternodeTraffic internode_traffic() const { return internode_traffic_; }
  // A CPU tensor (uninitialized, contiguous) in this rank's shared arena: shared memory that every
  // rank of the host maps. When dispatch's x, x_scales, topk_idx, topk_weights or combine's x,
  // topk_weights lie there, the single copy reads them with plain loads from the receivers'
  // mappings -- memcpy speed, where process_vm_readv copies at about 0.4x of it -- and combine
  // reduces the rows straight from them; anything else moves as before. Local (no communication).
  // Tensors elsewhere are copied into the arena by dispatch and combine themselves (a memcpy here
  // and one at the reader beat process_vm_readv); allocating them there saves that copy.
  // The arena holds at most CommOptions::shared_arena_bytes per rank; a tensor that does not fit,
  // or memory the system will not commit, is a user error. The tensor may outlive the Buffer. Only
  // this Buffer's arena counts: a tensor of another Buffer's arena passed here is an error.
  rt::Tensor alloc_shared_tensor(const rt::Shape& shape, rt::DType dtype);
  // Bytes this rank has read from its peers' arenas with plain loads (dispatch and combine), to
  // check that inputs were placed where the peers map them.
  int64_t shared_bytes_read() const { return shared_bytes_read_; }
  Comm& comm() const { return *comm_; }
  std::vector<LinkStats> link_stats() const;

  // Bytes per rank that low-latency calls need: the rings, so that low_latency_dispatch / combine
  // never wait for the receiver (a Buffer smaller than this is an error in low-latency calls of CPU
  // tensors), and at least what the GPU path stages in its device window.
  // Sizes past int64 give INT64_MAX (no Buffer is that large).
  static int64_t low_latency_size_hint(int max_tokens_per_rank, int64_t hidden, int num_ranks, int num_experts);

  // Local (no communication; CPU tensors out). topk_idx [tokens, k] int64 or int32 (CPU or CUDA),
  // -1 = none; a user error on this rank for bad shapes or out-of-range indices (dispatch reports
  // the same on every rank).
  DispatchLayout get_dispatch_layout(const rt::Tensor& topk_idx, int num_experts) const;

  DispatchResult dispatch(const DispatchArgs& args);
  // x: [handle.num_recv_tokens, hidden] bf16 (or f16, f32); topk_weights: [recv, k] f32, optional.
  // previous_event and async_finish as DispatchArgs's (the handle's device routing is kept alive
  // with the inputs).
  CombineResult combine(const rt::Tensor& x, const DispatchHandle& handle, const rt::Tensor& topk_weights = {},
                        const Event& previous_event = {}, bool async_finish = false);

  // x: [tokens <= max_tokens_per_rank, hidden] bf16; topk_idx [tokens, k] int64/int32.
  LowLatencyDispatchResult low_latency_dispatch(const rt::Tensor& x, const rt::Tensor& topk_idx, int max_tokens_per_rank,
                                                int num_experts, bool use_fp8 = true, bool return_recv_hook = false);
  // x: [local_experts, size * max_tokens, hidden] bf16 (rows as low_latency_dispatch placed them);
  // topk_idx / topk_weights: this rank's routing given to the dispatch, [tokens, k].
  LowLatencyCombineResult low_latency_combine(const rt::Tensor& x, const rt::Tensor& topk_idx,
                                              const rt::Tensor& topk_weights, const LowLatencyHandle& handle,
                                              bool return_recv_hook = false);

  // Low-latency calls on CUDA tensors queued on `stream` (a CUstream of this rank's device): they
  // return at once, with no agreement among the ranks and no host synchronization, so they run
  // back to back and can be captured in a CUDA graph (after one call of each kind has run: the
  // kernels compile at first use, and outputs come from a caching pool). Every rank must choose
  // alike. Inputs must stay alive and unchanged, and outputs are ready, in the stream's order (a
  // hook queues the receive when it is called). Errors the kernels find -- a peer whose data does
  // not come within the communicator's timeout, invalid top-k indices on any rank, a combine's
  // topk_idx differing from its dispatch's -- are raised by the next low-latency call or by
  // synchronize_low_latency(); input errors a rank can see alone are raised by its call, at once.
  // The stream must stay valid while the Buffer still makes calls with it set; only the Buffer's
  // destructor does without it (it waits for the queued calls on the context), so the stream may be
  // destroyed just before the Buffer.
  void set_low_latency_stream(rt::CuStream stream);
  // Back to synchronous low-latency calls (after synchronize_low_latency()).
  void reset_low_latency_stream();
  // Waits for the low-latency calls queued so far and raises the errors they met.
  void synchronize_low_latency();

  // The normal-mode dispatch and combine of CUDA tensors size their kernels for this many SMs
  // (0, the default: every SM of the device): two scatter blocks and one receive block (dispatch)
  // or two reduce blocks (combine) per SM, so that work on other streams keeps the rest of the GPU
  // (DeepEP's Buffer.set_num_sms; on the nccl plane: two blocks per SM for its gather and reduce,
  // NCCL's own kernels take what NCCL decides). The GPU places the blocks: it is a budget of blocks,
  // not a set of SMs. Local (ranks may choose differently). A user error for num_sms < 0 or without
  // a GPU data plane (CommOptions::cuda_device).
  void set_num_sms(int num_sms);

 private:
  std::shared_ptr<Group> group_;
  std::unique_ptr<Comm> comm_;
  int64_t num_nvl_bytes_ = 0;
  int64_t num_rdma_bytes_ = 0;
  bool low_latency_mode_ = false;
  // Every rank's process id when dispatch and combine of CPU tensors read peers' rows directly
  // (buffer/peer_memory.h), else empty.
  std::vector<int> peer_pids_;
  std::unique_ptr<detail::SharedArena> arena_;  // buffer/shared_arena.h
  // The single copy's inputs that lie outside the arena are copied into it first, for peers to
  // read at memcpy speed (SharedArena::copy_in); DEEPEP_COPY_INTO_ARENA=0: they read them in place.
  bool copy_into_arena_ = true;
  int64_t shared_bytes_read_ = 0;
  bool hierarchical_ = false;
  InternodeTraffic internode_traffic_;
  uint64_t next_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // hooks check the Buffer still exists
};

}  // namespace deepep
