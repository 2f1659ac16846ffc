// Collectives on a communicator, on contiguous CPU tensors, or CUDA tensors of the communicator's
// device plane (CommOptions::cuda_device; every rank on the same side). Every rank calls the same
// collective with tensors of the same dtype and size (checked: a disagreement is an error on every
// rank). On the GPU the algorithm argument is ignored: the data moves through the cuda_ipc windows,
// or NCCL's own algorithms run (CommOptions::device_transport "nccl").
//
// dtypes: f32, f16, bf16, i32 (and i64, f64) for reductions; any dtype for data movement.
// Reductions of f16/bf16 accumulate in f32 and round once per step.
//
// Algorithms for all_reduce and reduce_scatter:
//   Direct: one exchange of every rank's part to its owner, reduced there in rank order, then one
//           exchange of the reduced parts (all-gather); 2 steps, each rank sends (n-1)/n of the data
//           twice. Deterministic: the result does not depend on timing. Big tensors go in blocks of
//           64 MiB, which bound the temporaries.
//   Ring:   reduce-scatter then all-gather around the ring, 2(n-1) steps of 1/n of the data each.
//   Tree:   all_reduce only: a binomial tree reduces the whole tensor to rank 0, then sends the result
//           back down; 2 ceil(log2 n) steps with one peer each, every step the whole tensor (for
//           small tensors on many ranks, where the number of messages per rank matters).
//   Hierarchical: all_reduce only, on groups whose ranks lie on several nodes (Group::node; one
//           node: the same steps and bits as Direct). With L the smallest node's size, the tensor is
//           cut into L parts. (1) Inside every node, the ranks of local rank l < L receive part l
//           from the node's other ranks and reduce it (direct, one step). (2) The ranks of local
//           rank l, one per node, all-reduce part l among themselves (Direct on that subgroup: two
//           steps whatever the number of nodes) -- L groups at once, so L NICs per node carry the
//           inter-node traffic instead of one leader's. (3) Each of them sends its part to the other
//           ranks of its node. 4 steps; local ranks >= L of a bigger node take no part in (2).
//           Sum order, the same on every rank: every node's partial sum in local-rank order (rounded
//           to the dtype: f16/bf16 round there and at the end), then those partials in node order.
//   Auto:   the communicator's choice for the size (Comm::auto_all_reduce, auto_reduce_scatter):
//           choose_all_reduce / choose_reduce_scatter below on the group's network (Comm::network).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepep/topology.h"
#include "rt/tensor.h"

namespace deepep {

class Comm;

enum class ReduceOp { Sum, Max, Min };
enum class Algorithm { Auto, Ring, Direct, Tree, Hierarchical };

const char* name(ReduceOp op);
const char* name(Algorithm algorithm);

// What Auto runs for a size on a network, and why.
struct AlgorithmChoice {
  Algorithm algorithm = Algorithm::Direct;
  int64_t bucket_bytes = 0;              // the size decided for: bytes rounded up to a power of two
  std::vector<Algorithm> candidates;     // what was simulated, in order (ties go to the earlier)
  std::vector<double> predicted_seconds;  // the simulator's time for each candidate
  // One node on shared memory: the rule measured on this host decides by the exact size, and
  // nothing is simulated (the simulator has no memory copies or reductions, which are what differs
  // there).
  bool measured_rule = false;
  // "hierarchical (predicted: direct 12.3 us, ring 45.6 us, tree 78.9 us, hierarchical 9.8 us)"
  std::string to_string() const;
};

// Whether the measured rule decides on `network` (one node on shared memory, several ranks).
bool measured_rule_applies(const GroupNetwork& network);
// Sizes with the same key get the same choice on `network`: their power-of-two bucket, or where the
// measured rule decides, the side of its threshold they are on (Comm caches choices by it).
int64_t choice_key(const GroupNetwork& network, int64_t bytes);

// The size Auto decides for: bytes rounded up to a power of two (at least 1; at most 2^62).
int64_t size_bucket(int64_t bytes);

// all_reduce's Auto for `bytes` per rank on `network` (topology.h; user error when network.check()
// fails or bytes is negative). The candidates are Direct, Ring, Tree and, on several nodes,
// Hierarchical; each runs in the simulator (simulator.h: the library's own variants on
// sim::group_network) at bucket_bytes, and the fastest is chosen. Except on one node on shared
// memory, where the rule measured on this host stands, on the exact size: Direct below 4 MiB (fewest
// steps), Ring from 4 MiB on more than 2 ranks (it reduces on receive, with no temporaries;
// docs/perf.md). One rank:
// Direct, nothing simulated. Deterministic: the same network and size give the same choice on every
// rank.
AlgorithmChoice choose_all_reduce(const GroupNetwork& network, int64_t bytes);
// reduce_scatter's Auto for an input of `bytes` per rank: Direct or Ring, decided the same way.
AlgorithmChoice choose_reduce_scatter(const GroupNetwork& network, int64_t bytes);

// In place: every rank's `tensor` becomes the reduction over ranks.
void all_reduce(Comm& comm, const rt::Tensor& tensor, ReduceOp op = ReduceOp::Sum, Algorithm algorithm = Algorithm::Auto);
// input: n * size elements; output: n elements, rank r's = reduction of every rank's r-th part.
void reduce_scatter(Comm& comm, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op = ReduceOp::Sum,
                    Algorithm algorithm = Algorithm::Auto);
// input: n elements; output: size * n elements, rank r's input at part r.
void all_gather(Comm& comm, const rt::Tensor& output, const rt::Tensor& input);
// input and output: size * n elements; part j of rank i's input becomes part i of rank j's output.
void all_to_all(Comm& comm, const rt::Tensor& output, const rt::Tensor& input);
// Counts in elements, one per rank: rank i's send_counts[j] elements for rank j (taken in order
// from input) land at rank j's part i (parts in rank order in output). Every rank's recv_counts[i]
// must equal rank i's send_counts for it (checked).
void all_to_allv(Comm& comm, const rt::Tensor& output, const std::vector<int64_t>& recv_counts, const rt::Tensor& input,
                 const std::vector<int64_t>& send_counts);
// In place: every rank's `tensor` becomes root's.
void broadcast(Comm& comm, const rt::Tensor& tensor, int root);
void barrier(Comm& comm);

}  // namespace deepep
