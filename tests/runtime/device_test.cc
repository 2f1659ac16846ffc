#include "rt/device.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using rt::Device;
using rt::ErrorKind;
using rt_test::expect_error;
using rt_test::ScopedEnv;

TEST(Devices, CpuIsAlwaysAvailableAndFirst) {
  const std::vector<Device> devices = rt::available_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0], Device::cpu());
  for (size_t i = 1; i < devices.size(); ++i) EXPECT_EQ(devices[i], Device::cuda(static_cast<int>(i - 1)));
}

TEST(Devices, BestDeviceAndTheOverride) {
  const bool has_cuda = rt::available_devices().size() > 1;
  {
    ScopedEnv unset("TL_DEVICE", std::nullopt);
    EXPECT_EQ(rt::best_device(), has_cuda ? Device::cuda(0) : Device::cpu());
  }
  {
    ScopedEnv cpu("TL_DEVICE", "cpu");
    EXPECT_EQ(rt::best_device(), Device::cpu());
  }
  {
    ScopedEnv cuda("TL_DEVICE", "cuda");
    if (has_cuda)
      EXPECT_EQ(rt::best_device(), Device::cuda(0));
    else
      expect_error([] { rt::best_device(); }, ErrorKind::User, "TL_DEVICE=cuda but no CUDA device is usable");
  }
  {
    ScopedEnv far("TL_DEVICE", "cuda:4096");
    expect_error([] { rt::best_device(); }, ErrorKind::User, "TL_DEVICE=cuda:4096");
  }
  ScopedEnv bad("TL_DEVICE", "gpu");
  expect_error([] { rt::best_device(); }, ErrorKind::User, "TL_DEVICE: 'gpu' is not a device",
               "use cpu, cuda or cuda:N");
}

TEST(Devices, Parse) {
  EXPECT_EQ(rt::parse_device("cpu", "--device"), Device::cpu());
  EXPECT_EQ(rt::parse_device("cuda", "--device"), Device::cuda(0));
  EXPECT_EQ(rt::parse_device("cuda:3", "--device"), Device::cuda(3));
  for (const char* bad : {"cuda:", "cuda:-1", "cuda:1x", "CPU", ""})
    expect_error([&] { rt::parse_device(bad, "--device"); }, ErrorKind::User, "--device: '");
}

}  // namespace
