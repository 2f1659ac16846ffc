#include "collectives/gpu_collectives.h"

#include <algorithm>

#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep {
namespace {

int opcode_of(ReduceOp op) { return op == ReduceOp::Sum ? 0 : op == ReduceOp::Max ? 1 : 2; }  // the kernels' kOp

int64_t align256(int64_t v) { return (v + 255) / 256 * 256; }

// The other ranks, starting after `me`: the order this rank pushes to them in. A multi_copy runs
// its copies' blocks in table order, so with every rank starting at the same peer that peer's links
// took every rank's writes at once while the others idled (4 ranks: all_reduce at 0.64x NCCL, stop
// 24); rotated by rank, each step of the pushes is a permutation of the ranks.
std::vector<int> peers_after(int me, int R) {
  std::vector<int> peers;
  for (int i = 1; i < R; ++i) peers.push_back((me + i) % R);
  return peers;
}

}  // namespace

// All-reduce of a CUDA tensor through the device windows, in chunks, each cut into one part per
// rank (parts of `part` elements, a multiple of 16 bytes): every rank pushes part p of its chunk
// into rank p's window (a region per source), rank p reduces its part (its own copy in place, the
// others from its window) in rank order and pushes the result into every other rank's window, and
// every rank copies the other parts' results from its window into its tensor. Each rank writes
// 2 (n-1)/n of the data over the links (the bandwidth-optimal amount; writes, which the links carry
// better than reads), and nothing is copied in first. Two ways to run it, by what measured faster
// on the H200 x2 (docs/perf.md, stop 20):
//   - a tensor of one chunk: one kernel (intranode.cuh: all_reduce_body), each block taking its
//     piece of every part through the three steps and signalling the same block of the others
//     (24 us at up to 256 KiB against 42 for the phases, equal at 256 MiB);
//   - more chunks: the steps as phases of the whole chunk, device barriers between them, a chunk's
//     collects and the next chunk's pushes in one launch (1-2.5% faster at 1-4 GiB than the one
//     kernel, not understood).
void all_reduce_on_device(DevicePlane& plane, const rt::Tensor& tensor, ReduceOp op) {
  const int R = plane.size(), me = plane.rank();
  const int64_t es = rt::bits(tensor.dtype()) / 8, n = tensor.numel(), unit = 16 / es;
  // Window: R source regions of one part each, then the chunk's results.
  const int64_t W = plane.window().bytes();
  auto part_of = [&](int64_t c) { return ((c + R - 1) / R + unit - 1) / unit * unit; };
  int64_t chunk = std::max<int64_t>(1, std::min(n, W / 2 / es));
  while (chunk > 1 && align256(part_of(chunk) * es) * R + chunk * es > W) chunk /= 2;
  const int64_t part = part_of(chunk), stride = align256(part * es), out_off = stride * R;
  RT_USER_CHECK(stride * R + chunk * es <= W, "deepep all_reduce: the device window (", W,
                " bytes) is too small for ", R, " ranks");
  const uint64_t data = reinterpret_cast<uint64_t>(tensor.data());
  const int opcode = opcode_of(op);
  if (n <= chunk) {
    plane.all_reduce(tensor.dtype(), opcode, data, n, part, stride, out_off);
    plane.finish(false, {}, "all_reduce");
    return;
  }
  // Part q of a chunk of c elements: [first(q), first(q) + len(q)).
  auto first = [&](int q, int64_t c) { return std::min(q * part, c); };
  auto len = [&](int q, int64_t c) { return std::min(part, c - first(q, c)); };
  const std::vector<int> peers = peers_after(me, R);
  std::vector<CopyDesc> copies;  // per chunk: the R - 1 pushes, then the R - 1 collects
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c = std::min(chunk, n - c0);
    for (int r : peers)
      copies.push_back({plane.window().window(r) + uint64_t(me * stride), data + uint64_t((c0 + first(r, c)) * es),
                        len(r, c) * es});
    for (int r : peers)
      copies.push_back({data + uint64_t((c0 + first(r, c)) * es),
                        plane.window().window(me) + uint64_t(out_off + first(r, c) * es), len(r, c) * es});
  }
  DeviceTables tables;
  tables.add(copies);
  const uint64_t descs = plane.upload(tables);
  // A chunk's collects (local copies out of this rank's results) and the next chunk's pushes (writes
  // into the peers' source regions, free since their reductions passed the barrier) are adjacent in
  // the table and go in one launch, so the local copies overlap the link writes.
  const uint64_t group = uint64_t(R - 1) * sizeof(CopyDesc);
  plane.multi_copy(descs, R - 1, part * es);
  uint64_t at = descs + group;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c = std::min(chunk, n - c0);
    plane.device_barrier();
    const uint64_t mine = data + uint64_t((c0 + first(me, c)) * es);
    plane.reduce_part(tensor.dtype(), opcode, mine, mine, len(me, c), 0, stride, out_off + first(me, c) * es);
    plane.device_barrier();
    const bool last = c0 + chunk >= n;
    plane.multi_copy(at, last ? R - 1 : 2 * (R - 1), part * es);
    at += last ? group : 2 * group;
  }
  plane.finish(false, {}, "all_reduce");
}

// Reduce-scatter in chunks of every part: rank me pushes its chunk of part r into rank r's window (a
// region per source); after a barrier each rank reduces its own part (its copy where it is, the
// others from its window) in rank order into the output; a second barrier frees the regions for the
// next chunk.
void reduce_scatter_on_device(DevicePlane& plane, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op) {
  const int R = plane.size(), me = plane.rank();
  const int64_t es = rt::bits(input.dtype()) / 8, n = output.numel();
  const int64_t W = plane.window().bytes();
  const int64_t chunk = std::min(n, (W / R / 256 * 256) / es);
  RT_USER_CHECK(chunk > 0, "deepep reduce_scatter: the device window (", W, " bytes) is too small for ", R, " ranks");
  const int64_t stride = align256(chunk * es);
  const uint64_t in = reinterpret_cast<uint64_t>(input.data()), out = reinterpret_cast<uint64_t>(output.data());
  std::vector<CopyDesc> pushes;  // per chunk: to every other rank
  for (int64_t c0 = 0; c0 < n; c0 += chunk)
    for (int r : peers_after(me, R))
      pushes.push_back({plane.window().window(r) + uint64_t(me * stride), in + uint64_t((r * n + c0) * es),
                        std::min(chunk, n - c0) * es});
  DeviceTables tables;
  tables.add(pushes);
  uint64_t at = plane.upload(tables);
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t len = std::min(chunk, n - c0);
    plane.multi_copy(at, R - 1, len * es);
    at += uint64_t(R - 1) * sizeof(CopyDesc);
    plane.device_barrier();
    plane.reduce_part(input.dtype(), opcode_of(op), in + uint64_t((me * n + c0) * es), out + uint64_t(c0 * es), len,
                      0, stride, -1);
    if (c0 + chunk < n) plane.device_barrier();
  }
  plane.finish(false, {}, "reduce_scatter");
}

// In rounds through two halves of every window, each cut into a region per source: round c's pushes
// go to half c % 2. A round's collects (local copies out of this rank's half) and the next round's
// pushes (into the peers' other half, which they emptied before the last barrier) go in one launch.
void exchange_on_device(DevicePlane& plane, const std::vector<DevicePiece>& send, const std::vector<DevicePiece>& recv,
                        const std::vector<int64_t>& pair_bytes, const char* what) {
  const int R = plane.size(), me = plane.rank();
  const int64_t half = plane.window().bytes() / 2, region = half / R / 256 * 256;
  RT_USER_CHECK(region > 0, "deepep ", what, ": the device window (", plane.window().bytes(), " bytes) is too small for ",
                R, " ranks");
  int64_t largest = 0;  // over the pairs between different ranks
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j)
      if (i != j) largest = std::max(largest, pair_bytes[size_t(i * R + j)]);
  const int64_t rounds = (largest + region - 1) / region;
  auto piece = [&](const DevicePiece& p, int64_t c) {
    const int64_t first = c * region, bytes = std::clamp<int64_t>(p.bytes - first, 0, region);
    return std::pair{p.address + uint64_t(first), bytes};
  };
  auto slot = [&](int owner, int64_t c, int source) {
    return plane.window().window(owner) + uint64_t((c % 2) * half + source * region);
  };
  // [the local copy, round 0's pushes], then per round [its collects, the next round's pushes].
  std::vector<CopyDesc> copies{{recv[size_t(me)].address, send[size_t(me)].address, send[size_t(me)].bytes}};
  const std::vector<int> peers = peers_after(me, R);
  auto pushes = [&](int64_t c) {
    for (int d : peers) {
      const auto [src, bytes] = piece(send[size_t(d)], c);
      copies.push_back({slot(d, c, me), src, c < rounds ? bytes : 0});
    }
  };
  pushes(0);
  for (int64_t c = 0; c < rounds; ++c) {
    for (int s = 0; s < R; ++s)
      if (s != me) {
        const auto [dst, bytes] = piece(recv[size_t(s)], c);
        copies.push_back({dst, slot(me, c, s), bytes});
      }
    pushes(c + 1);
  }
  DeviceTables tables;
  tables.add(copies);
  const uint64_t descs = plane.upload(tables);
  const uint64_t group = uint64_t(2 * (R - 1)) * sizeof(CopyDesc);
  plane.multi_copy(descs, R, std::max(send[size_t(me)].bytes, std::min(largest, region)));
  for (int64_t c = 0; c < rounds; ++c) {
    plane.device_barrier();
    plane.multi_copy(descs + sizeof(CopyDesc) * uint64_t(R) + uint64_t(c) * group, 2 * (R - 1), region);
  }
  plane.finish(false, {}, what);
}

}  // namespace deepep
