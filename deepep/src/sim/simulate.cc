// The event loop: chunks crossing links in time order, transfers released by their dependencies.
#include <algorithm>
#include <cmath>
#include <queue>

#include "deepep/simulator.h"
#include "rt/error.h"

namespace deepep::sim {
namespace {

struct Event {
  double time;
  int64_t seq;  // ties go in the order events were made: deterministic results
  int transfer, chunk, hop;
  bool operator>(const Event& o) const { return time > o.time || (time == o.time && seq > o.seq); }
};

}  // namespace

Result simulate(const Network& net, const std::vector<Transfer>& transfers, double chunk_bytes, int max_chunks) {
  RT_USER_CHECK(chunk_bytes > 0 && max_chunks >= 0, "deepep::sim::simulate: chunk_bytes (", chunk_bytes,
                ") must be positive and max_chunks (", max_chunks, ") not negative");
  const size_t n = transfers.size();
  std::vector<int> waiting(n, 0);                  // dependencies not yet arrived
  std::vector<std::vector<int>> dependents(n);
  std::vector<double> ready(n, 0.0);               // when all dependencies had arrived
  for (size_t t = 0; t < n; ++t) {
    const Transfer& x = transfers[t];
    RT_USER_CHECK(x.src >= 0 && x.dst >= 0 && x.src < net.gpus() && x.dst < net.gpus() && x.bytes >= 0,
                  "deepep::sim::simulate: transfer ", t, " (", x.src, " -> ", x.dst, ", ", x.bytes, " bytes) is not on ",
                  net.name());
    for (int d : x.after) {
      RT_USER_CHECK(d >= 0 && size_t(d) < n && size_t(d) != t, "deepep::sim::simulate: transfer ", t,
                    " depends on ", d);
      ++waiting[t];
      dependents[size_t(d)].push_back(int(t));
    }
  }
  std::vector<std::vector<int>> routes(n);
  std::vector<int> chunks(n, 0), chunks_left(n, 0);
  std::vector<double> chunk_size(n, chunk_bytes);
  std::vector<double> link_free(net.links().size(), 0.0), link_busy(net.links().size(), 0.0);
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue;
  int64_t seq = 0;
  Result result;
  size_t arrived = 0;

  std::vector<int> stack;  // transfers whose dependencies are met, to start
  auto finish = [&](int t, double when) {
    ++arrived;
    result.seconds = std::max(result.seconds, when);
    for (int d : dependents[size_t(t)]) {
      ready[size_t(d)] = std::max(ready[size_t(d)], when);
      if (--waiting[size_t(d)] == 0) stack.push_back(d);
    }
  };
  auto start = [&](int t) {
    const Transfer& x = transfers[size_t(t)];
    routes[size_t(t)] = net.route(x.src, x.dst);
    if (routes[size_t(t)].empty() || x.bytes == 0) {
      finish(t, ready[size_t(t)]);
      return;
    }
    if (max_chunks > 0) chunk_size[size_t(t)] = std::max(chunk_bytes, x.bytes / max_chunks);
    chunks[size_t(t)] = std::max(1, int(std::ceil(x.bytes / chunk_size[size_t(t)])));
    chunks_left[size_t(t)] = chunks[size_t(t)];
    for (int c = 0; c < chunks[size_t(t)]; ++c) queue.push({ready[size_t(t)], seq++, t, c, 0});
  };
  for (size_t t = 0; t < n; ++t)
    if (waiting[t] == 0) stack.push_back(int(t));
  auto drain = [&] {
    while (!stack.empty()) {
      const int t = stack.back();
      stack.pop_back();
      start(t);
    }
  };
  drain();
  while (!queue.empty()) {
    const Event e = queue.top();
    queue.pop();
    ++result.chunk_hops;
    const Transfer& x = transfers[size_t(e.transfer)];
    const std::vector<int>& route = routes[size_t(e.transfer)];
    const int c = chunks[size_t(e.transfer)];
    const double cs = chunk_size[size_t(e.transfer)];
    const double size = e.chunk + 1 < c ? cs : x.bytes - cs * (c - 1);
    const int l = route[size_t(e.hop)];
    const Link& link = net.links()[size_t(l)];
    const double begin = std::max(e.time, link_free[size_t(l)]);
    const double end = begin + size / link.bandwidth;
    link_free[size_t(l)] = end;
    link_busy[size_t(l)] += end - begin;
    const double arrive = end + link.latency;
    if (size_t(e.hop) + 1 < route.size()) {
      queue.push({arrive, seq++, e.transfer, e.chunk, e.hop + 1});
    } else if (--chunks_left[size_t(e.transfer)] == 0) {
      finish(e.transfer, arrive);
      drain();
    }
  }
  RT_USER_CHECK(arrived == n, "deepep::sim::simulate: ", n - arrived, " transfers never started (a dependency cycle)");
  for (double b : link_busy) result.max_link_busy = std::max(result.max_link_busy, b);
  return result;
}

}  // namespace deepep::sim
