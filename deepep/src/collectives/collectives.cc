#include <algorithm>
#include <cstring>
#include <functional>

#include "bootstrap/wire.h"
#include "buffer/checks.h"
#include "collectives/gpu_collectives.h"
#include "collectives/nccl_collectives.h"
#include "collectives/parts.h"
#include "collectives/reduce.h"
#include "deepep/collectives.h"
#include "deepep/comm.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep {
namespace {

// Reduce-scatter temporaries are bounded by processing big tensors in blocks of this many bytes.
constexpr size_t kBlockBytes = 64u << 20;

std::string check_tensor(const rt::Tensor& t, const char* role, rt::Device device = rt::Device::cpu()) {
  if (!t.defined()) return rt::str(role, " is undefined");
  if (t.device() != device)
    return rt::str(role, " is on ", t.device().to_string(), "; ",
                   device.is_cpu() ? "this communicator moves CPU tensors (give it a CUDA device: "
                                     "CommOptions::cuda_device)"
                                   : rt::str("expected ", device.to_string()));
  if (!t.is_contiguous()) return rt::str(role, " ", t.shape_string(), " is not contiguous");
  if (rt::bits(t.dtype()) % 8 != 0) return rt::str(role, " has packed dtype ", rt::name(t.dtype()), "; not supported");
  return "";
}

// Where the input lives (data_device), check_tensor of both there, then that the output has the
// input's dtype ("" when all hold).
std::string check_in_out(const Comm& comm, const rt::Tensor& input, const rt::Tensor& output, rt::Device* device) {
  std::string err = detail::data_device(input, "the input", comm, device, detail::PlaneUse::Either);
  if (err.empty()) err = check_tensor(input, "the input", *device);
  if (err.empty()) err = check_tensor(output, "the output", *device);
  if (err.empty() && output.dtype() != input.dtype())
    err = rt::str("output dtype ", rt::name(output.dtype()), " differs from input dtype ", rt::name(input.dtype()));
  return err;
}

std::string describe(const rt::Tensor& t) {
  return t.defined() ? rt::str(rt::name(t.dtype()), "[", t.numel(), "]") : std::string("undefined");
}

uint64_t address(const rt::Tensor& t) { return reinterpret_cast<uint64_t>(t.data()); }

// The pieces of an exchange in which every rank sends every other rank `bytes` (rank i's send[j]
// and recv[j] given by the callers' offsets).
std::vector<int64_t> uniform_pairs(int ranks, int64_t bytes) {
  return std::vector<int64_t>(size_t(ranks) * size_t(ranks), bytes);
}

// A pairwise exchange of CUDA tensors on the communicator's device plane.
void exchange_on_plane(Comm& comm, const std::vector<DevicePiece>& send, const std::vector<DevicePiece>& recv,
                       const std::vector<int64_t>& pair_bytes, const char* what) {
  if (NcclPlane* nccl = comm.nccl_plane()) return exchange_nccl(*nccl, send, recv, what);
  exchange_on_device(*comm.device_plane(), send, recv, pair_bytes, what);
}

ReadFn reader(const uint8_t* base, size_t es) {
  return [base, es](size_t first, size_t n, uint8_t* dst) { std::memcpy(dst, base + first * es, n * es); };
}
WriteFn writer(uint8_t* base, size_t es) {
  return [base, es](size_t first, size_t n, const uint8_t* src) { std::memcpy(base + first * es, src, n * es); };
}

// The ranks one step of a collective runs among, in the order its parts and sums follow, and this
// rank's index among them.
struct Members {
  std::vector<int> ranks;
  int me = 0;
};

Members everyone(const Engine& e) {
  Members m{std::vector<int>(size_t(e.size())), e.rank()};
  for (int r = 0; r < e.size(); ++r) m.ranks[size_t(r)] = r;
  return m;
}

// One exchange of a direct reduce-scatter among the members: this rank sends its part i (p.len[i]
// elements at in + p.off[i]) to member i, receives its own part from every other member into temp
// (room for members x p.len[me] elements) and reduces them with its own in member order into out
// (which may be its own part).
void direct_reduce_scatter_step(Engine& e, const Members& m, uint8_t* out, const uint8_t* in, const Parts& p,
                                uint8_t* temp, size_t es, rt::DType dtype, ReduceOp op, const std::string& what) {
  const size_t members = m.ranks.size(), me = size_t(m.me), mine = p.len[me];
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (size_t i = 0; i < members; ++i) {
    if (i == me) continue;
    sends.push_back({m.ranks[i], es, p.len[i], reader(in + p.off[i] * es, es)});
    recvs.push_back({m.ranks[i], es, mine, writer(temp + i * mine * es, es)});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
  if (mine == 0) return;
  std::vector<const void*> parts(members);
  for (size_t i = 0; i < members; ++i)
    parts[i] = i == me ? static_cast<const void*>(in + p.off[me] * es) : static_cast<const void*>(temp + i * mine * es);
  reduce_ordered(out, parts, mine, dtype, op);
}

// Reduce-scatter of `parts` (rank r's part j at in + p.off[j]); rank me's reduced part goes to out.
// Direct: every rank sends part j to rank j, which reduces in rank order, in blocks that bound the
// temporaries.
void direct_reduce_scatter(Engine& e, uint8_t* out, const uint8_t* in, const Parts& p, size_t es, rt::DType dtype,
                           ReduceOp op, const std::string& what) {
  const int R = e.size();
  const size_t max_len = *std::max_element(p.len.begin(), p.len.end());
  const size_t block = std::max<size_t>(1, kBlockBytes / es / size_t(R));
  const rt::Tensor temp_t = e.pool().empty({int64_t(size_t(R) * std::min(block, max_len) * es)}, rt::DType::U8);
  const Members all = everyone(e);
  for (size_t b0 = 0; b0 < max_len; b0 += block) {
    Parts blk;
    for (int r = 0; r < R; ++r) {
      blk.off.push_back(p.off[size_t(r)] + b0);
      blk.len.push_back(p.len[size_t(r)] > b0 ? std::min(block, p.len[size_t(r)] - b0) : size_t(0));
    }
    direct_reduce_scatter_step(e, all, out + b0 * es, in, blk, static_cast<uint8_t*>(temp_t.data()), es, dtype, op,
                               what);
  }
}

// Ring reduce-scatter in place on `data` (parts p): after it, part `me` holds the reduction.
void ring_reduce_scatter(Engine& e, uint8_t* data, const Parts& p, size_t es, rt::DType dtype, ReduceOp op,
                         const std::string& what) {
  const int R = e.size(), me = e.rank();
  const int next = (me + 1) % R, prev = (me + R - 1) % R;
  for (int s = 0; s < R - 1; ++s) {
    const int sseg = ((me - s - 1) % R + R) % R, rseg = ((me - s - 2) % R + R) % R;
    uint8_t* rbase = data + p.off[size_t(rseg)] * es;
    std::vector<SendSpec> sends{{next, es, p.len[size_t(sseg)], reader(data + p.off[size_t(sseg)] * es, es)}};
    std::vector<RecvSpec> recvs{{prev, es, p.len[size_t(rseg)],
                                 [rbase, es, dtype, op](size_t first, size_t n, const uint8_t* src) {
                                   reduce_into(rbase + first * es, src, n, dtype, op);
                                 }}};
    e.exchange(std::move(sends), std::move(recvs), what);
  }
}

// Ring all-gather in place: part `me` is known; afterwards every part is.
void ring_all_gather(Engine& e, uint8_t* data, const Parts& p, size_t es, const std::string& what) {
  const int R = e.size(), me = e.rank();
  const int next = (me + 1) % R, prev = (me + R - 1) % R;
  for (int s = 0; s < R - 1; ++s) {
    const int sseg = ((me - s) % R + R) % R, rseg = ((me - s - 1) % R + R) % R;
    std::vector<SendSpec> sends{{next, es, p.len[size_t(sseg)], reader(data + p.off[size_t(sseg)] * es, es)}};
    std::vector<RecvSpec> recvs{{prev, es, p.len[size_t(rseg)], writer(data + p.off[size_t(rseg)] * es, es)}};
    e.exchange(std::move(sends), std::move(recvs), what);
  }
}

// Tree all-reduce in place: at step k (mask 2^k) rank r with r % 2^(k+1) == 2^k sends its partial
// result to r - 2^k, which reduces it into its own; rank 0 ends with the result, which then goes
// back down the same tree. Every rank takes part in every step (empty ones included), so the
// exchanges line up.
void tree_all_reduce(Engine& e, uint8_t* data, size_t n, size_t es, rt::DType dtype, ReduceOp op,
                     const std::string& what) {
  const int R = e.size(), me = e.rank();
  int top = 1;
  while (top < R) top <<= 1;
  for (int mask = 1; mask < top; mask <<= 1) {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    if (me % (2 * mask) == mask) {
      sends.push_back({me - mask, es, n, reader(data, es)});
    } else if (me % (2 * mask) == 0 && me + mask < R) {
      recvs.push_back({me + mask, es, n, [data, es, dtype, op](size_t first, size_t k, const uint8_t* src) {
                         reduce_into(data + first * es, src, k, dtype, op);
                       }});
    }
    e.exchange(std::move(sends), std::move(recvs), what);
  }
  for (int mask = top / 2; mask >= 1; mask >>= 1) {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    if (me % (2 * mask) == 0 && me + mask < R)
      sends.push_back({me + mask, es, n, reader(data, es)});
    else if (me % (2 * mask) == mask)
      recvs.push_back({me - mask, es, n, writer(data, es)});
    e.exchange(std::move(sends), std::move(recvs), what);
  }
}

// Direct all-gather in place among the members: member i's part (p.off[i], p.len[i]) goes to
// every other member.
void direct_all_gather(Engine& e, const Members& m, uint8_t* data, const Parts& p, size_t es, const std::string& what) {
  const size_t me = size_t(m.me);
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (size_t i = 0; i < m.ranks.size(); ++i) {
    if (i == me) continue;
    sends.push_back({m.ranks[i], es, p.len[me], reader(data + p.off[me] * es, es)});
    recvs.push_back({m.ranks[i], es, p.len[i], writer(data + p.off[i] * es, es)});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

// Hierarchical all-reduce in place (collectives.h): per block, a direct reduce-scatter inside each
// node onto its first L local ranks (L: the smallest node's size), a direct all-reduce of part l
// among the ranks of local rank l across nodes, a direct all-gather inside each node. Every rank
// takes part in every step (empty where it has no role), so the exchanges line up.
void hierarchical_all_reduce(Engine& e, const Group& g, uint8_t* data, size_t n, size_t es, rt::DType dtype,
                             ReduceOp op, const std::string& what) {
  std::vector<std::vector<int>> node_ranks(size_t(g.num_nodes()));
  for (const PeerInfo& peer : g.peers()) node_ranks[size_t(peer.node)].push_back(peer.rank);  // local-rank order
  size_t L = node_ranks[0].size();
  for (const std::vector<int>& ranks : node_ranks) L = std::min(L, ranks.size());
  const size_t nodes = node_ranks.size(), local = size_t(g.local_rank());
  const Members node{node_ranks[size_t(g.node())], g.local_rank()};
  Members across{{e.rank()}, 0};  // the ranks of this local rank, one per node; alone beyond L
  if (local < L) {
    across = {{}, g.node()};
    for (const std::vector<int>& ranks : node_ranks) across.ranks.push_back(ranks[local]);
  }
  const size_t block = std::max<size_t>(size_t(g.size()), kBlockBytes / es);
  const size_t part_max = (std::min(block, n) + L - 1) / L;
  const size_t temp_elems = std::max(node.ranks.size() * part_max, nodes * ((part_max + nodes - 1) / nodes));
  const rt::Tensor temp_t = e.pool().empty({int64_t(temp_elems * es)}, rt::DType::U8);
  uint8_t* const temp = static_cast<uint8_t*>(temp_t.data());
  for (size_t b0 = 0; b0 < n; b0 += block) {
    const size_t nb = std::min(block, n - b0);
    uint8_t* blk = data + b0 * es;
    Parts in_node = split(nb, int(L));  // local ranks beyond L own nothing
    in_node.off.resize(node.ranks.size(), nb);
    in_node.len.resize(node.ranks.size(), 0);
    uint8_t* part = blk + in_node.off[local] * es;
    direct_reduce_scatter_step(e, node, part, blk, in_node, temp, es, dtype, op, what);
    if (nodes > 1) {
      const Parts sub = split(in_node.len[local], int(across.ranks.size()));
      direct_reduce_scatter_step(e, across, part + sub.off[size_t(across.me)] * es, part, sub, temp, es, dtype, op,
                                 what);
      direct_all_gather(e, across, part, sub, es, what);
    }
    direct_all_gather(e, node, blk, in_node, es, what);
  }
}

}  // namespace

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* name(Algorithm a) {
  switch (a) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::Direct: return "direct";
    case Algorithm::Tree: return "tree";
    case Algorithm::Hierarchical: return "hierarchical";
  }
  return "?";
}

namespace {

// The algorithm a CPU collective runs: the requested one, or Auto's choice (the GPU path has one
// algorithm, and a call whose inputs are already an error runs none: nothing to choose). A choice
// that fails (the simulation running out of memory on a large group) is this rank's error for the
// agreement, so its peers raise it too instead of waiting for it.
// op and algorithm come from callers' casts too (bindings, integers from a config): a value outside
// the enums used to run as some reduction (or algorithm) without a word.
std::string check_enums(ReduceOp op, Algorithm algorithm) {
  if (std::string(name(op)) == "?") return rt::str("op=", int(op), " is not a ReduceOp (Sum, Max, Min)");
  if (std::string(name(algorithm)) == "?")
    return rt::str("algorithm=", int(algorithm), " is not an Algorithm (Auto, Ring, Direct, Tree, Hierarchical)");
  return "";
}

Algorithm resolve_auto(Algorithm requested, bool on_gpu, std::string& err, const std::function<Algorithm()>& choose) {
  if (requested != Algorithm::Auto) return requested;
  if (on_gpu || !err.empty()) return Algorithm::Direct;
  try {
    return choose();
  } catch (const std::exception& e) {
    err = rt::str("choosing the algorithm: ", e.what());
    return Algorithm::Direct;
  }
}

}  // namespace

void all_reduce(Comm& comm, const rt::Tensor& tensor, ReduceOp op, Algorithm algorithm) {
  Engine& e = comm.engine();
  const std::string what = "all_reduce";
  e.begin_op(what);
  rt::Device dev;
  std::string err = detail::data_device(tensor, "the tensor", comm, &dev, detail::PlaneUse::Either);
  if (err.empty()) err = check_tensor(tensor, "the tensor", dev);
  if (err.empty() && !reducible(tensor.dtype()))
    err = rt::str("cannot reduce ", rt::name(tensor.dtype()), " (f32, f16, bf16, i32, i64, f64 can)");
  if (err.empty()) err = check_enums(op, algorithm);
  const Algorithm a =
      resolve_auto(algorithm, dev.is_cuda(), err, [&] { return comm.auto_all_reduce(tensor.nbytes()).algorithm; });
  e.agree(what,
          rt::str("all_reduce(", describe(tensor), ", ", name(op), ", ", dev.is_cuda() ? "on the GPU" : name(a), ")"),
          err);
  const size_t n = size_t(tensor.numel());
  if (comm.size() == 1 || n == 0) return;
  if (dev.is_cuda() && comm.nccl_plane()) return all_reduce_nccl(*comm.nccl_plane(), tensor, op);
  if (dev.is_cuda()) return all_reduce_on_device(*comm.device_plane(), tensor, op);
  const size_t es = size_t(rt::bits(tensor.dtype()) / 8);
  uint8_t* data = static_cast<uint8_t*>(tensor.data());
  if (a == Algorithm::Tree) {
    tree_all_reduce(e, data, n, es, tensor.dtype(), op, what);
  } else if (a == Algorithm::Hierarchical) {
    hierarchical_all_reduce(e, comm.group(), data, n, es, tensor.dtype(), op, what);
  } else if (a == Algorithm::Direct) {
    // Blocks keep the temporaries of the reduce-scatter bounded.
    const size_t block = std::max<size_t>(size_t(comm.size()), kBlockBytes / es);
    for (size_t b0 = 0; b0 < n; b0 += block) {
      const size_t nb = std::min(block, n - b0);
      const Parts p = split(nb, comm.size());
      uint8_t* blk = data + b0 * es;
      // Reduce-scatter: part j of every rank goes to rank j (input parts at blk + off[j]).
      direct_reduce_scatter(e, blk + p.off[size_t(e.rank())] * es, blk, p, es, tensor.dtype(), op, what);
      direct_all_gather(e, everyone(e), blk, p, es, what);
    }
  } else {
    const Parts p = split(n, comm.size());
    ring_reduce_scatter(e, data, p, es, tensor.dtype(), op, what);
    ring_all_gather(e, data, p, es, what);
  }
}

void reduce_scatter(Comm& comm, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op, Algorithm algorithm) {
  Engine& e = comm.engine();
  const std::string what = "reduce_scatter";
  e.begin_op(what);
  rt::Device dev;
  std::string err = check_in_out(comm, input, output, &dev);
  if (err.empty() && !reducible(input.dtype()))
    err = rt::str("cannot reduce ", rt::name(input.dtype()), " (f32, f16, bf16, i32, i64, f64 can)");
  if (err.empty() && input.numel() != output.numel() * comm.size())
    err = rt::str("input has ", input.numel(), " elements; it needs size (", comm.size(), ") x output (", output.numel(),
                  ")");
  if (err.empty()) err = check_enums(op, algorithm);
  if (err.empty() && (algorithm == Algorithm::Tree || algorithm == Algorithm::Hierarchical))
    err = rt::str("Algorithm::", algorithm == Algorithm::Tree ? "Tree" : "Hierarchical",
                  " is an all_reduce algorithm; reduce_scatter takes Direct, Ring or Auto");
  const Algorithm a =
      resolve_auto(algorithm, dev.is_cuda(), err, [&] { return comm.auto_reduce_scatter(input.nbytes()).algorithm; });
  e.agree(what,
          rt::str("reduce_scatter(", describe(input), " -> ", describe(output), ", ", name(op), ", ",
                  dev.is_cuda() ? "on the GPU" : name(a), ")"),
          err);
  const size_t n = size_t(output.numel());
  if (dev.is_cuda() && comm.nccl_plane()) return reduce_scatter_nccl(*comm.nccl_plane(), output, input, op);
  if (dev.is_cuda()) {
    const int64_t bytes = output.nbytes();
    if (comm.size() == 1 || n == 0)  // a local copy
      return exchange_on_device(*comm.device_plane(), {{address(input), bytes}}, {{address(output), bytes}}, {bytes},
                                what.c_str());
    return reduce_scatter_on_device(*comm.device_plane(), output, input, op);
  }
  const size_t es = size_t(rt::bits(input.dtype()) / 8);
  const Parts p = split(n * size_t(comm.size()), comm.size());
  const uint8_t* in = static_cast<const uint8_t*>(input.data());
  uint8_t* out = static_cast<uint8_t*>(output.data());
  if (comm.size() == 1 || n == 0) {
    if (n) std::memcpy(out, in, n * es);
    return;
  }
  if (a == Algorithm::Direct) {
    direct_reduce_scatter(e, out, in, p, es, input.dtype(), op, what);
  } else {
    const rt::Tensor work_t = e.pool().empty({int64_t(n * size_t(comm.size()) * es)}, rt::DType::U8);
    uint8_t* const work = static_cast<uint8_t*>(work_t.data());
    std::memcpy(work, in, n * size_t(comm.size()) * es);
    ring_reduce_scatter(e, work, p, es, input.dtype(), op, what);
    std::memcpy(out, work + p.off[size_t(e.rank())] * es, n * es);
  }
}

void all_gather(Comm& comm, const rt::Tensor& output, const rt::Tensor& input) {
  Engine& e = comm.engine();
  const std::string what = "all_gather";
  e.begin_op(what);
  rt::Device dev;
  std::string err = check_in_out(comm, input, output, &dev);
  if (err.empty() && output.numel() != input.numel() * comm.size())
    err = rt::str("output has ", output.numel(), " elements; it needs size (", comm.size(), ") x input (",
                  input.numel(), ")");
  e.agree(what, rt::str("all_gather(", describe(input), " -> ", describe(output), dev.is_cuda() ? ", on the GPU" : "", ")"),
          err);
  const size_t n = size_t(input.numel());
  const size_t es = size_t(rt::bits(input.dtype()) / 8);
  if (dev.is_cuda() && comm.nccl_plane()) return all_gather_nccl(*comm.nccl_plane(), output, input);
  if (dev.is_cuda()) {
    const int64_t bytes = input.nbytes();
    std::vector<DevicePiece> send, recv;
    for (int j = 0; j < comm.size(); ++j) {
      send.push_back({address(input), bytes});
      recv.push_back({address(output) + uint64_t(j) * uint64_t(bytes), bytes});
    }
    return exchange_on_device(*comm.device_plane(), send, recv, uniform_pairs(comm.size(), bytes), what.c_str());
  }
  uint8_t* out = static_cast<uint8_t*>(output.data());
  const uint8_t* in = static_cast<const uint8_t*>(input.data());
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int j = 0; j < comm.size(); ++j) {
    sends.push_back({j, es, n, reader(in, es)});
    recvs.push_back({j, es, n, writer(out + size_t(j) * n * es, es)});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

void all_to_all(Comm& comm, const rt::Tensor& output, const rt::Tensor& input) {
  Engine& e = comm.engine();
  const std::string what = "all_to_all";
  e.begin_op(what);
  rt::Device dev;
  std::string err = check_in_out(comm, input, output, &dev);
  if (err.empty() && (output.numel() != input.numel() || input.numel() % comm.size() != 0))
    err = rt::str("input (", input.numel(), " elements) and output (", output.numel(),
                  " elements) must be equal and divisible by the group size ", comm.size());
  e.agree(what, rt::str("all_to_all(", describe(input), " -> ", describe(output), dev.is_cuda() ? ", on the GPU" : "", ")"),
          err);
  const size_t n = size_t(input.numel()) / size_t(comm.size());
  const size_t es = size_t(rt::bits(input.dtype()) / 8);
  if (dev.is_cuda()) {
    const int64_t bytes = int64_t(n * es);
    std::vector<DevicePiece> send, recv;
    for (int j = 0; j < comm.size(); ++j) {
      send.push_back({address(input) + uint64_t(j) * uint64_t(bytes), bytes});
      recv.push_back({address(output) + uint64_t(j) * uint64_t(bytes), bytes});
    }
    return exchange_on_plane(comm, send, recv, uniform_pairs(comm.size(), bytes), what.c_str());
  }
  uint8_t* out = static_cast<uint8_t*>(output.data());
  const uint8_t* in = static_cast<const uint8_t*>(input.data());
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int j = 0; j < comm.size(); ++j) {
    sends.push_back({j, es, n, reader(in + size_t(j) * n * es, es)});
    recvs.push_back({j, es, n, writer(out + size_t(j) * n * es, es)});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

void all_to_allv(Comm& comm, const rt::Tensor& output, const std::vector<int64_t>& recv_counts, const rt::Tensor& input,
                 const std::vector<int64_t>& send_counts) {
  Engine& e = comm.engine();
  const std::string what = "all_to_allv";
  e.begin_op(what);
  const int R = comm.size();
  rt::Device dev;
  std::string err = check_in_out(comm, input, output, &dev);
  if (err.empty() && (send_counts.size() != size_t(R) || recv_counts.size() != size_t(R)))
    err = rt::str("send_counts (", send_counts.size(), ") and recv_counts (", recv_counts.size(),
                  ") need one count per rank (", R, ")");
  int64_t total_send = 0, total_recv = 0;
  if (err.empty()) {
    for (int r = 0; r < R; ++r) {
      if (send_counts[size_t(r)] < 0 || recv_counts[size_t(r)] < 0) err = "negative count";
      total_send += send_counts[size_t(r)];
      total_recv += recv_counts[size_t(r)];
    }
    if (err.empty() && total_send > input.numel())
      err = rt::str("send_counts add up to ", total_send, " elements but the input has ", input.numel());
    if (err.empty() && total_recv > output.numel())
      err = rt::str("recv_counts add up to ", total_recv, " elements but the output has ", output.numel());
  }
  wire::Writer w;
  w.put_vec(send_counts).put_vec(recv_counts);
  const auto all = e.agree(what,
                           rt::str("all_to_allv(", input.defined() ? rt::name(input.dtype()) : "undefined",
                                   dev.is_cuda() ? ", on the GPU" : "", ")"),
                           err, err.empty() ? w.str() : std::string());
  // Every rank checks every pair, so a mismatch is the same error everywhere.
  std::vector<std::vector<int64_t>> sc(static_cast<size_t>(R)), rc(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    wire::Reader rd(all[size_t(r)]);
    sc[size_t(r)] = rd.get_vec<int64_t>();
    rc[size_t(r)] = rd.get_vec<int64_t>();
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j)
      RT_USER_CHECK(sc[size_t(i)][size_t(j)] == rc[size_t(j)][size_t(i)], "deepep all_to_allv: rank ", i, " sends ",
                    sc[size_t(i)][size_t(j)], " elements to rank ", j, " but rank ", j, " expects ",
                    rc[size_t(j)][size_t(i)]);
  const size_t es = size_t(rt::bits(input.dtype()) / 8);
  if (dev.is_cuda()) {
    std::vector<DevicePiece> send, recv;
    std::vector<int64_t> pairs(size_t(R) * size_t(R));
    int64_t soff = 0, roff = 0;
    for (int j = 0; j < R; ++j) {
      send.push_back({address(input) + uint64_t(soff) * es, send_counts[size_t(j)] * int64_t(es)});
      recv.push_back({address(output) + uint64_t(roff) * es, recv_counts[size_t(j)] * int64_t(es)});
      soff += send_counts[size_t(j)];
      roff += recv_counts[size_t(j)];
      for (int i = 0; i < R; ++i) pairs[size_t(i * R + j)] = sc[size_t(i)][size_t(j)] * int64_t(es);
    }
    return exchange_on_plane(comm, send, recv, pairs, what.c_str());
  }
  uint8_t* out = static_cast<uint8_t*>(output.data());
  const uint8_t* in = static_cast<const uint8_t*>(input.data());
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  size_t soff = 0, roff = 0;
  for (int j = 0; j < R; ++j) {
    sends.push_back({j, es, size_t(send_counts[size_t(j)]), reader(in + soff * es, es)});
    recvs.push_back({j, es, size_t(recv_counts[size_t(j)]), writer(out + roff * es, es)});
    soff += size_t(send_counts[size_t(j)]);
    roff += size_t(recv_counts[size_t(j)]);
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

void broadcast(Comm& comm, const rt::Tensor& tensor, int root) {
  Engine& e = comm.engine();
  const std::string what = "broadcast";
  e.begin_op(what);
  rt::Device dev;
  std::string err = detail::data_device(tensor, "the tensor", comm, &dev, detail::PlaneUse::Either);
  if (err.empty()) err = check_tensor(tensor, "the tensor", dev);
  if (err.empty() && (root < 0 || root >= comm.size()))
    err = rt::str("root ", root, " is out of range for a group of ", comm.size());
  e.agree(what, rt::str("broadcast(", describe(tensor), ", root ", root, dev.is_cuda() ? ", on the GPU" : "", ")"), err);
  const size_t n = size_t(tensor.numel());
  const size_t es = size_t(rt::bits(tensor.dtype()) / 8);
  if (dev.is_cuda() && comm.nccl_plane()) return broadcast_nccl(*comm.nccl_plane(), tensor, root);
  if (dev.is_cuda()) {
    const int R = comm.size(), me = comm.rank();
    const int64_t bytes = tensor.nbytes();
    std::vector<DevicePiece> send(size_t(R), {address(tensor), 0}), recv(size_t(R), {address(tensor), 0});
    std::vector<int64_t> pairs(size_t(R) * size_t(R), 0);
    for (int j = 0; j < R; ++j)
      if (j != root) {
        pairs[size_t(root * R + j)] = bytes;
        if (me == root) send[size_t(j)].bytes = bytes;
      }
    if (me != root) recv[size_t(root)].bytes = bytes;
    return exchange_on_device(*comm.device_plane(), send, recv, pairs, what.c_str());
  }
  uint8_t* data = static_cast<uint8_t*>(tensor.data());
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  if (comm.rank() == root) {
    for (int j = 0; j < comm.size(); ++j)
      if (j != root) sends.push_back({j, es, n, reader(data, es)});
  } else {
    recvs.push_back({root, es, n, writer(data, es)});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

void barrier(Comm& comm) { comm.barrier(); }

}  // namespace deepep
