// A discrete-event simulator of communication on cluster topologies, to predict what cannot be run
// here: dispatch/combine and all-reduce from 8 to 10,000 GPUs on fat-trees, 3-D tori and NVLink
// domains (docs/deepep.md, "Simulator").
//
// Model. A network is a graph of endpoints (GPUs, numbered first) and switches joined by directed
// links, each with a bandwidth (bytes/s) and a latency (s). A workload is a set of transfers (src,
// dst, bytes), each allowed to start once the transfers it depends on have arrived (collective steps
// depend on the previous step). A transfer is cut into chunks that travel its route hop by hop;
// every link serves the chunks that reach it in arrival order, one at a time (store and forward per
// chunk, so long transfers pipeline across hops). Events are processed in time order, so contention
// between transfers on shared links is what the result measures.
//
// Routing is the topology's: dimension order on a torus, up-down through the lowest common switch
// level on a fat-tree, through the NVSwitch in an NVLink domain. Dispatch uses the library's
// hierarchical plan (plan_hierarchical_dispatch): a token crosses the network at most once per
// destination node, then is forwarded inside the node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace deepep::sim {

struct Link {
  int from = 0, to = 0;
  double bandwidth = 0;  // bytes per second
  double latency = 0;    // seconds
};

class Network {
 public:
  // `gpus` endpoints numbered 0..gpus-1; switches are added after them.
  explicit Network(int gpus, std::string name);
  int add_switch();
  // A pair of directed links a -> b and b -> a.
  void connect(int a, int b, double bandwidth, double latency);
  // The links a transfer from GPU src to GPU dst crosses, in order (empty when src == dst).
  std::vector<int> route(int src, int dst) const;
  // Sets the routing function (topology builders do).
  void set_router(std::function<std::vector<int>(const Network&, int, int)> router) { router_ = std::move(router); }

  int gpus() const { return gpus_; }
  int nodes() const { return nodes_; }
  const std::string& name() const { return name_; }
  const std::vector<Link>& links() const { return links_; }
  // The link from a to b; -1 when there is none.
  int link(int a, int b) const;

 private:
  int gpus_, nodes_;
  std::string name_;
  std::vector<Link> links_;
  std::vector<std::vector<std::pair<int, int>>> out_;  // node -> (neighbour, link)
  std::function<std::vector<int>(const Network&, int, int)> router_;
};

// NVLink domain: `gpus` GPUs on one NVSwitch (8 for an HGX board, 72 for an NVL72 rack).
Network nvlink_domain(int gpus, double bandwidth = 450e9, double latency = 1e-6);
// 3-D torus of x * y * z GPUs, each linked to its 6 neighbours (dimension-order routing, shorter
// way round).
Network torus3d(int x, int y, int z, double bandwidth = 100e9, double latency = 1e-6);
// Fat-tree: nodes of `gpus_per_node` GPUs on an NVSwitch, each GPU with a NIC to a leaf switch
// (`leaf_radix` GPUs per leaf), leaves all connected to `spines` spine switches (two levels).
Network fat_tree(int gpus, int gpus_per_node = 8, int leaf_radix = 32, int spines = 16, double nic_bandwidth = 50e9,
                 double nvlink_bandwidth = 450e9, double latency = 2e-6);
// A group's own network (deepep::GroupNetwork, topology.h): GPU (rank) g lies on node node_of[g].
// Inside a node, every GPU has a link of `link_bandwidth` to the node's switch (NVLink, PCIe or host
// memory; two hops of `link_latency` / 2). Between nodes, node n has nics[n] NICs, each a link of
// `nic_bandwidth` to one non-blocking switch; the GPU of local index l uses NIC l % nics[n] through
// a link of its own bandwidth (`link_bandwidth`), so ranks sharing a NIC share its bandwidth. A
// transfer across nodes pays `nic_latency` in all.
Network group_network(const std::vector<int>& node_of, const std::vector<int>& nics, double link_bandwidth,
                      double link_latency, double nic_bandwidth, double nic_latency);

struct Transfer {
  int src = 0, dst = 0;
  double bytes = 0;
  std::vector<int> after;  // transfers that must have arrived first
};

struct Result {
  double seconds = 0;       // when the last transfer arrived
  int64_t chunk_hops = 0;   // events processed
  double max_link_busy = 0; // the busiest link's busy time (s)
};

// Simulates the transfers on the network; chunks of at most `chunk_bytes`, or with `max_chunks`,
// a transfer in at most that many chunks (bigger ones where needed): fewer events for big
// transfers, at the cost of a coarser pipeline (a chunk crosses each hop whole).
Result simulate(const Network& net, const std::vector<Transfer>& transfers, double chunk_bytes = 1 << 20,
                int max_chunks = 0);

// Workloads. Ring all-reduce of `bytes` over all GPUs in index order (reduce-scatter then
// all-gather, 2(n-1) steps of bytes/n); on a torus, the dimension-wise variant: rings along x,
// then y on bytes/x, then z on bytes/(x y), and back (bidirectional: each ring carries half of its
// data each way).
std::vector<Transfer> ring_all_reduce(int gpus, double bytes);
// Direct all-reduce (the library's Algorithm::Direct): every GPU sends bytes/n to every other at
// once (reduce-scatter), then its reduced part to every other (all-gather); 2 latency steps.
std::vector<Transfer> direct_all_reduce(int gpus, double bytes);
// Tree all-reduce (the library's Algorithm::Tree): a binomial tree reduces the whole `bytes` to
// GPU 0 (ceil(log2 n) levels) and sends the result back down the same tree.
std::vector<Transfer> tree_all_reduce(int gpus, double bytes);
// Hierarchical all-reduce on nodes of `gpus_per_node` consecutive GPUs: a ring reduce-scatter
// inside each node, then for each local index a ring all-reduce across the nodes on that index's
// 1/gpus_per_node of the data (every GPU's own NIC carries one of them), then an all-gather inside
// each node. `gpus` a multiple of `gpus_per_node`. With `direct_steps`, every phase is direct (each
// member sends its share to every other member at once), as the library's Algorithm::Hierarchical
// runs them: 4 latency steps whatever the sizes, against the rings' 2 (k - 1) per phase.
std::vector<Transfer> hierarchical_all_reduce(int gpus, int gpus_per_node, double bytes, bool direct_steps = false);
// The library's Algorithm::Hierarchical on any nodes (collectives.h): nodes[n] lists node n's GPUs
// in local order. With L the smallest node's size: (1) every GPU sends part l (bytes / L) to local
// index l < L of its node, (2)-(3) the GPUs of each local index l < L, one per node, all-reduce
// part l with direct steps, (4) each sends its part to the rest of its node. For nodes of equal
// size, the same transfers as hierarchical_all_reduce(gpus, gpus_per_node, bytes, true).
std::vector<Transfer> hierarchical_all_reduce(const std::vector<std::vector<int>>& nodes, double bytes);
// Reduce-scatter alone (the library's reduce_scatter), `bytes` being each GPU's whole input: the
// first phase of ring_all_reduce and of direct_all_reduce.
std::vector<Transfer> ring_reduce_scatter(int gpus, double bytes);
std::vector<Transfer> direct_reduce_scatter(int gpus, double bytes);
std::vector<Transfer> torus_all_reduce(int x, int y, int z, double bytes);

// The hierarchical dispatch plan: `dest[t * topk + j]` is the rank of token t's j-th expert (-1:
// none) for the tokens of `src_rank`. A token goes once to each destination node -- to the rank with
// src_rank's local index there (the forwarder) -- and the forwarder hands it to each destination
// rank of its node; inside the source's own node it goes straight to each destination rank. Sends
// are aggregated per (from, to, stage): stage 0 leaves the source, stage 1 is a forward.
struct PlannedSend {
  int from = 0, to = 0;
  int64_t tokens = 0;
  int stage = 0;
};
std::vector<PlannedSend> plan_hierarchical_dispatch(int src_rank, const std::vector<int>& dest, int topk,
                                                    int ranks_per_node);

// Dispatch of `tokens_per_rank` tokens of `token_bytes` from every GPU, top-k of `experts` experts
// spread evenly over the GPUs, random routing (seed), planned hierarchically with nodes of
// `ranks_per_node` GPUs: the first leg (to the node) then the forward (inside it).
std::vector<Transfer> dispatch_workload(int gpus, int ranks_per_node, int tokens_per_rank, double token_bytes,
                                        int topk, int experts, uint64_t seed);
// Combine, the way back of the same routing (same seed): each expert's results go to the forwarder
// of its node (reduced there) and one transfer per token and node returns to the source; inside the
// source's node, straight back. `token_bytes`: of a combined token (BF16: 2 x hidden).
std::vector<Transfer> combine_workload(int gpus, int ranks_per_node, int tokens_per_rank, double token_bytes,
                                       int topk, int experts, uint64_t seed);


// The same dispatch and combine as aggregated flows, for clusters where the per-source plans above
// make too many transfers (about gpus^2 / ranks_per_node first legs and 7 times as many forwards):
// expected token counts from the routing distribution (top-k distinct experts, uniform, placed as
// above) instead of sampled tokens, and messages merged in two ways.
// - Lanes: the first legs of a (source node, destination node) pair travel as `lanes` messages
//   (a divisor of ranks_per_node) instead of one per rank; lane j leaves from rail
//   (a + b + j * ranks_per_node / lanes) mod ranks_per_node for the same rail of node b, carrying
//   ranks_per_node / lanes sources' tokens. lanes == ranks_per_node is the per-rank plan.
// - Batches: a forwarder forwards (and, in combine, returns) its incoming legs in `batches` runs of
//   source nodes, each waiting for its own legs, instead of one forward per leg and rank.
// The routing code still chooses every message's path. Tokens may be fractional (expectations).
struct FlowAggregation {
  int lanes = 1;
  int batches = 8;
};
std::vector<Transfer> dispatch_flows(int gpus, int ranks_per_node, double tokens_per_rank, double token_bytes, int topk,
                                     int experts, const FlowAggregation& aggregation);
// Combine: forwards come back to the forwarder per batch (reduced there), then each leg returns to
// its source once its batch is in; inside the source's node, straight back.
std::vector<Transfer> combine_flows(int gpus, int ranks_per_node, double tokens_per_rank, double token_bytes, int topk,
                                    int experts, const FlowAggregation& aggregation);

}  // namespace deepep::sim
