// NVML, loaded at run time (libnvidia-ml.so.1 comes with the driver, not the toolkit: no header
// here). Declared below: the few entry points and the one struct read, as NVML's API defines them.
#include <cctype>
#include <string>
#include <type_traits>
#include <vector>

#include "topology/probes.h"

namespace deepep::detail {
namespace {

using NvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct NvmlPciInfo {  // nvmlPciInfo_t (the _v3 query's layout)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*device_count)(unsigned*) = nullptr;
  NvmlReturn (*device_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*pci_info)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*nvlink_remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
};

// "0000:3B:00.0" and "00000000:3b:00.0" name the same device: compare domain-less, lower case.
std::string canonical_bus_id(const char* id) {
  std::string s(id);
  const size_t colon = s.find(':');
  if (colon != std::string::npos && s.find(':', colon + 1) != std::string::npos) s = s.substr(colon + 1);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void probe_nvml(Topology& topology) {
  std::string why;
  void* lib = open_library("libnvidia-ml.so.1", "NVML", why);
  if (!lib) {
    topology.nvml_status = why + ": no NVLink information";
    return;
  }
  NvmlApi api;
  const bool ok = load_symbol(lib, api.init, "nvmlInit_v2") && load_symbol(lib, api.shutdown, "nvmlShutdown") &&
                  load_symbol(lib, api.device_count, "nvmlDeviceGetCount_v2") &&
                  load_symbol(lib, api.device_by_index, "nvmlDeviceGetHandleByIndex_v2") &&
                  load_symbol(lib, api.pci_info, "nvmlDeviceGetPciInfo_v3") &&
                  load_symbol(lib, api.nvlink_state, "nvmlDeviceGetNvLinkState") &&
                  load_symbol(lib, api.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2") &&
                  load_symbol(lib, api.error_string, "nvmlErrorString") &&
                  load_symbol(lib, api.driver_version, "nvmlSystemGetDriverVersion");
  if (!ok) {
    topology.nvml_status = "libnvidia-ml.so.1 lacks an entry point this build uses";
    return;
  }
  if (NvmlReturn r = api.init(); r != 0) {
    topology.nvml_status = std::string("nvmlInit failed: ") + api.error_string(r);
    return;
  }
  unsigned count = 0;
  if (NvmlReturn r = api.device_count(&count); r != 0) {
    topology.nvml_status = std::string("nvmlDeviceGetCount failed: ") + api.error_string(r);
    api.shutdown();
    return;
  }
  std::vector<NvmlDevice> devices(count);
  for (unsigned i = 0; i < count; ++i) {
    NvmlPciInfo pci{};
    if (api.device_by_index(i, &devices[i]) != 0 || api.pci_info(devices[i], &pci) != 0) {
      topology.nvml_status = "NVML could not describe GPU " + std::to_string(i);
      api.shutdown();
      return;
    }
    topology.nvml_bus_ids.push_back(canonical_bus_id(pci.bus_id));
  }
  topology.links.assign(count, std::vector<int>(count, 0));
  topology.switch_links.assign(count, 0);
  for (unsigned i = 0; i < count; ++i) {
    for (unsigned l = 0; l < unsigned(kNvmlMaxLinks); ++l) {
      int active = 0;
      if (api.nvlink_state(devices[i], l, &active) != 0 || !active) continue;  // no such link, or down
      NvmlPciInfo remote{};
      if (api.nvlink_remote_pci(devices[i], l, &remote) != 0) continue;
      const std::string peer = canonical_bus_id(remote.bus_id);
      bool to_gpu = false;
      for (unsigned j = 0; j < count; ++j)
        if (topology.nvml_bus_ids[j] == peer) {
          ++topology.links[i][j];
          to_gpu = true;
        }
      if (!to_gpu) ++topology.switch_links[i];  // the far end is an NVSwitch
    }
  }
  char version[80] = "?";
  api.driver_version(version, sizeof(version));
  topology.nvml_status = "NVML (driver " + std::string(version) + "), " + std::to_string(count) + " GPUs";
  api.shutdown();
}

}  // namespace deepep::detail
