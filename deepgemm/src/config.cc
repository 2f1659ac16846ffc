#include "deepgemm/config.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "backend.h"
#include "rt/cuda_device.h"
#include "rt/env.h"
#include "rt/error.h"

namespace deepgemm {
namespace {

int g_num_sms = 0;  // 0: the device's count
std::mutex g_mutex;
thread_local GemmConfig t_last;
thread_local rt::CuStream t_stream = nullptr;

}  // namespace

void set_num_sms(int num_sms) {
  RT_USER_CHECK(num_sms >= 0, "deepgemm::set_num_sms: ", num_sms, " is negative (0 resets to the device's SM count)");
  if (num_sms > 0 && rt::cuda_device_count() > 0) {
    const int available = rt::cuda_device(0).sm_count;
    RT_USER_CHECK(num_sms <= available, "deepgemm::set_num_sms: ", num_sms, " is more than the ", available,
                  " SMs of cuda:0");
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_num_sms = num_sms;
}

int get_num_sms() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_num_sms > 0) return g_num_sms;
  }
  return rt::cuda_device_count() > 0 ? rt::cuda_device(0).sm_count : 0;
}

void set_stream(rt::CuStream stream) { t_stream = stream; }
rt::CuStream get_stream() { return t_stream; }

std::string GemmConfig::to_string() const {
  std::string s = rt::str(function, " m=", m, " n=", n, " k=", k);
  if (num_groups != 1) s += rt::str(" groups=", num_groups);
  s += rt::str(" -> ", kernel);
  if (block_m || block_n || block_k) s += rt::str(" block ", block_m, "x", block_n, "x", block_k);
  if (promotion_k) s += rt::str(" promotion every ", promotion_k, " of K");
  if (num_stages) s += rt::str(" stages ", num_stages);
  if (num_multicast) s += rt::str(" multicast ", num_multicast);
  if (split_k > 1) s += rt::str(" split-k ", split_k);
  if (round_sync) s += " round-synced";
  s += rt::str(" tasks ", num_tasks, backend == "cpu" ? " threads " : " sms ", num_threads);
  return s;
}

GemmConfig last_config() { return t_last; }

namespace detail {

void record_config(const GemmConfig& config) {
  t_last = config;
  if (!rt::env_flag("DG_PRINT_CONFIGS")) return;
  const std::string line = config.to_string();
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (printed.insert(line).second) std::fprintf(stderr, "deepgemm: %s\n", line.c_str());
}

}  // namespace detail
}  // namespace deepgemm
