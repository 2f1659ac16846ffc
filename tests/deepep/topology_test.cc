// Topology discovery on this machine: whatever hwloc and NVML can say here, consistent with what the
// OS reports, and a clear status for what is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "deepep/topology.h"

namespace {

TEST(Topology, NumaNodesCoverTheCpusOnce) {
  const deepep::Topology t = deepep::discover_topology();
  ASSERT_FALSE(t.hwloc_status.empty());
  if (t.hwloc_status.rfind("hwloc API", 0) != 0) GTEST_SKIP() << t.hwloc_status;
  ASSERT_GE(t.numa_nodes.size(), 1u) << t.to_string();
  std::set<int> cpus, nodes;
  size_t total = 0;
  for (const deepep::NumaNode& n : t.numa_nodes) {
    EXPECT_TRUE(nodes.insert(n.os_index).second) << "NUMA node " << n.os_index << " listed twice";
    EXPECT_FALSE(n.cpus.empty()) << "NUMA node " << n.os_index << " without CPUs";
    for (int c : n.cpus) {
      EXPECT_GE(c, 0);
      EXPECT_TRUE(cpus.insert(c).second) << "CPU " << c << " in two NUMA nodes";
    }
    total += n.cpus.size();
  }
  // The allowed CPUs (a container may restrict them) are all known to hwloc.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(long(total), 1);
  EXPECT_LE(long(total), online) << t.to_string();
  for (const deepep::PciDevice& d : t.gpus) {
    EXPECT_EQ(d.vendor_id, 0x10de) << d.bus_id;
    EXPECT_TRUE(d.numa_node == -1 || nodes.count(d.numa_node)) << d.bus_id << " on NUMA " << d.numa_node;
  }
  const std::string report = t.to_string();
  EXPECT_NE(report.find("NUMA node"), std::string::npos) << report;
}

TEST(Topology, NvlinkMatrixIsConsistent) {
  const deepep::Topology t = deepep::discover_topology();
  ASSERT_FALSE(t.nvml_status.empty());
  const size_t n = t.links.size();
  if (n == 0) {  // no NVML (no driver) or no GPU: said, and nothing is connected
    EXPECT_FALSE(t.nvlink_connected(0, 1));
    EXPECT_TRUE(t.switch_links.empty());
    return;
  }
  ASSERT_EQ(t.switch_links.size(), n);
  ASSERT_EQ(t.nvml_bus_ids.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(t.links[i].size(), n);
    EXPECT_EQ(t.links[i][i], 0) << "a GPU linked to itself";
    EXPECT_FALSE(t.nvlink_connected(int(i), int(i)));
    for (size_t j = 0; j < n; ++j) {
      EXPECT_EQ(t.links[i][j], t.links[j][i]) << "NVLink counts differ between GPU " << i << " and " << j;
      EXPECT_EQ(t.nvlink_connected(int(i), int(j)), t.nvlink_connected(int(j), int(i)));
    }
  }
}

}  // namespace
