// hwloc, loaded at run time: the build only needs its header (for the object layout and the
// function types), so binaries start on machines without the library and report it instead.
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "topology/probes.h"

#if __has_include(<hwloc.h>)
#include <hwloc.h>
#define DEEPEP_HAVE_HWLOC_HEADER 1
#endif

namespace deepep::detail {

#if defined(DEEPEP_HAVE_HWLOC_HEADER)
namespace {

// The exported functions used (the header's inline helpers are avoided: they would need linking).
struct HwlocApi {
  decltype(&hwloc_get_api_version) get_api_version = nullptr;
  decltype(&hwloc_topology_init) topology_init = nullptr;
  decltype(&hwloc_topology_set_io_types_filter) set_io_types_filter = nullptr;
  decltype(&hwloc_topology_load) topology_load = nullptr;
  decltype(&hwloc_topology_destroy) topology_destroy = nullptr;
  decltype(&hwloc_get_nbobjs_by_depth) nbobjs_by_depth = nullptr;
  decltype(&hwloc_get_obj_by_depth) obj_by_depth = nullptr;
  decltype(&hwloc_bitmap_first) bitmap_first = nullptr;
  decltype(&hwloc_bitmap_next) bitmap_next = nullptr;
};

// Loads the library once; `why` says what is missing when it returns null.
const HwlocApi* load_hwloc(std::string& why) {
  static std::string error;
  static const HwlocApi* api = []() -> const HwlocApi* {
    void* lib = open_library("libhwloc.so.15", "hwloc", error);
    if (!lib) return nullptr;
    static HwlocApi a;
    const bool ok = load_symbol(lib, a.get_api_version, "hwloc_get_api_version") &&
                    load_symbol(lib, a.topology_init, "hwloc_topology_init") &&
                    load_symbol(lib, a.set_io_types_filter, "hwloc_topology_set_io_types_filter") &&
                    load_symbol(lib, a.topology_load, "hwloc_topology_load") &&
                    load_symbol(lib, a.topology_destroy, "hwloc_topology_destroy") &&
                    load_symbol(lib, a.nbobjs_by_depth, "hwloc_get_nbobjs_by_depth") &&
                    load_symbol(lib, a.obj_by_depth, "hwloc_get_obj_by_depth") &&
                    load_symbol(lib, a.bitmap_first, "hwloc_bitmap_first") &&
                    load_symbol(lib, a.bitmap_next, "hwloc_bitmap_next");
    if (!ok) {
      error = "libhwloc.so.15 lacks a function of the hwloc 2 API";
      return nullptr;
    }
    // The object layout read below is hwloc 2's (the header's major version).
    if ((a.get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
      error = "libhwloc.so.15 has API version " + std::to_string(a.get_api_version() >> 16) + ", not the " +
              std::to_string(HWLOC_API_VERSION >> 16) + " this build reads";
      return nullptr;
    }
    return &a;
  }();
  why = error;
  return api;
}

std::vector<int> bits(const HwlocApi& api, hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  for (int i = api.bitmap_first(set); i >= 0; i = api.bitmap_next(set, i)) out.push_back(i);
  return out;
}

// The NUMA node an I/O object is closest to: the first NUMA node of its first non-I/O ancestor.
int numa_of(const HwlocApi& api, hwloc_obj_t obj) {
  while (obj && !obj->cpuset) obj = obj->parent;
  if (!obj || !obj->nodeset) return -1;
  return api.bitmap_first(obj->nodeset);
}

}  // namespace

void probe_hwloc(Topology& topology) {
  std::string why;
  const HwlocApi* api = load_hwloc(why);
  if (!api) {
    topology.hwloc_status = why;
    return;
  }
  hwloc_topology_t topo = nullptr;
  if (api->topology_init(&topo) != 0) {
    topology.hwloc_status = "hwloc_topology_init failed";
    return;
  }
  // PCI devices are filtered out by default; keep the ones that matter (GPUs, NICs).
  api->set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (api->topology_load(topo) != 0) {
    api->topology_destroy(topo);
    topology.hwloc_status = "hwloc_topology_load failed";
    return;
  }
  const unsigned version = api->get_api_version();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "hwloc API %u.%u.%u", version >> 16, (version >> 8) & 0xff, version & 0xff);
  topology.hwloc_status = buf;

  const int numa = api->nbobjs_by_depth(topo, HWLOC_TYPE_DEPTH_NUMANODE);
  for (int i = 0; i < numa; ++i) {
    hwloc_obj_t obj = api->obj_by_depth(topo, HWLOC_TYPE_DEPTH_NUMANODE, unsigned(i));
    NumaNode node;
    node.os_index = int(obj->os_index);
    node.cpus = bits(*api, obj->cpuset);
    node.memory_bytes = obj->attr ? int64_t(obj->attr->numanode.local_memory) : 0;
    topology.numa_nodes.push_back(std::move(node));
  }
  const int pci = api->nbobjs_by_depth(topo, HWLOC_TYPE_DEPTH_PCI_DEVICE);
  for (int i = 0; i < pci; ++i) {
    hwloc_obj_t obj = api->obj_by_depth(topo, HWLOC_TYPE_DEPTH_PCI_DEVICE, unsigned(i));
    const auto& a = obj->attr->pcidev;
    const int base_class = a.class_id >> 8;
    const bool gpu = a.vendor_id == 0x10de && base_class == 0x03;   // display / 3D controller
    const bool nic = a.class_id == 0x0200 || a.class_id == 0x0207;  // Ethernet, InfiniBand
    if (!gpu && !nic) continue;
    PciDevice d;
    d.kind = gpu ? PciDevice::Kind::Gpu : PciDevice::Kind::Nic;
    std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", unsigned(a.domain), unsigned(a.bus), unsigned(a.dev),
                  unsigned(a.func));
    d.bus_id = buf;
    d.vendor_id = a.vendor_id;
    d.device_id = a.device_id;
    d.class_id = a.class_id;
    d.numa_node = numa_of(*api, obj);
    (gpu ? topology.gpus : topology.nics).push_back(std::move(d));
  }
  api->topology_destroy(topo);
}

#else

void probe_hwloc(Topology& topology) {
  topology.hwloc_status = "built without hwloc's header (install libhwloc-dev and rebuild)";
}

#endif

}  // namespace deepep::detail
