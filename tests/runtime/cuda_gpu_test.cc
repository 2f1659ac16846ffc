// The CUDA runtime on a real GPU: memory, NVRTC-compiled kernels, clusters, events, TMA
// descriptors. Every test that needs a GPU skips (with the reason) where there is none; the kernels'
// sources are compiled by NVRTC wherever NVRTC is installed, so CI still checks they compile.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/cuda_module.h"
#include "rt/cuda_stream.h"
#include "rt/device.h"
#include "rt/nvrtc.h"
#include "rt/tensor.h"
#include "rt/tensor_map.h"
#include "test_util.h"

namespace {

using rt::CudaKernel;
using rt::CudaModule;
using rt::Device;
using rt::Dim3;
using rt::DType;
using rt::ErrorKind;
using rt::Tensor;
using rt_test::expect_error;

#define REQUIRE_GPU()                                                                                 \
  if (rt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU: " << rt::cuda_unavailable_reason(); \
  if (!rt::nvrtc_available()) GTEST_SKIP() << "no NVRTC: " << rt::nvrtc_error()

constexpr const char* kKernels = R"(
struct alignas(64) TmaDesc { unsigned long long words[16]; };

extern "C" __global__ void vadd(float* c, const float* a, const float* b, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Writes each block's cluster rank and cluster size: out[block] = 100 * rank + size.
extern "C" __global__ void cluster_rank(unsigned* out) {
#if __CUDA_ARCH__ >= 900
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) out[blockIdx.x] = 100 * rank + size;
#endif
}

// A programmatic dependent launch pair: `pdl_first` lets its dependent start, then sets flag[0]
// after about 100 us; `pdl_second` (launched overlapping it) waits for the flag, at most 1 s, and
// writes what it saw to flag[1].
__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void pdl_first(volatile int* flag) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const unsigned long long start = now_ns();
  while (now_ns() - start < 100000) {
  }
  flag[0] = 1;
}
extern "C" __global__ void pdl_second(volatile int* flag) {
  const unsigned long long start = now_ns();
  while (flag[0] == 0 && now_ns() - start < 1000000000ull) {
  }
  flag[1] = flag[0];
}

// Fills `bytes` of dynamic shared memory, then writes their sum per thread stride: out[t] = sum.
extern "C" __global__ void big_smem(unsigned* out, int words) {
  extern __shared__ unsigned smem_words[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) smem_words[i] = i;
  __syncthreads();
  unsigned sum = 0;
  for (int i = threadIdx.x; i < words; i += blockDim.x) sum += smem_words[words - 1 - i];
  out[threadIdx.x] = sum;
}

// Writes through a bad pointer: an illegal-address fault.
extern "C" __global__ void fault(int* p) { *reinterpret_cast<volatile int*>(p) = 1; }

// One TMA load of a 64x64 bf16 box at (x0, y0) into shared memory, then shared memory as it is
// (swizzled or not) copied to out.
extern "C" __global__ void tma_load(const __grid_constant__ TmaDesc desc, unsigned short* out, int x0, int y0) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) unsigned char tile[];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned tile_addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(64 * 64 * 2)
                 : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(tile_addr), "l"(reinterpret_cast<unsigned long long>(&desc)), "r"(x0), "r"(y0), "r"(bar_addr)
        : "memory");
  }
  unsigned done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar_addr)
                 : "memory");
  const unsigned short* t = reinterpret_cast<const unsigned short*>(tile);
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) out[i] = t[i];
#endif
}
)";

rt::NvrtcResult compile_kernels(const std::string& arch) {
  rt::NvrtcOptions options;
  options.arch = arch;
  return rt::compile_cuda(kKernels, "cuda_gpu_test.cu", {}, options);
}

// The module of kKernels for device 0, loaded once.
const CudaModule& module() {
  static const CudaModule m = CudaModule::load(compile_kernels(rt::cuda_device(0).arch_name()), "cuda_gpu_test", 0);
  return m;
}

rt::CuDevicePtr dptr(const Tensor& t) { return static_cast<rt::CuDevicePtr>(reinterpret_cast<uintptr_t>(t.data())); }

Tensor random_floats(int64_t n, std::mt19937& rng) {
  Tensor t = Tensor::empty({n}, DType::F32);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

TEST(CudaGpuKernels, CompileForHopperAndAmpereWithoutAGpu) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "no NVRTC: " << rt::nvrtc_error();
  for (const char* arch : {"sm_90a", "sm_80"}) {
    SCOPED_TRACE(arch);
    const rt::NvrtcResult r = compile_kernels(arch);
    for (const char* entry :
         {".entry vadd(", ".entry cluster_rank(", ".entry big_smem(", ".entry tma_load(", ".entry fault("})
      EXPECT_NE(r.ptx.find(entry), std::string::npos) << entry;
    EXPECT_EQ(r.ptx.find("cp.async.bulk.tensor.2d") != std::string::npos, std::string(arch) == "sm_90a");
    EXPECT_FALSE(r.cubin.empty());
  }
}

TEST(CudaGpu, DeviceInfo) {
  REQUIRE_GPU();
  const rt::CudaDeviceInfo& dev = rt::cuda_device(0);
  EXPECT_EQ(&dev, &rt::cuda_device(0));  // read once
  EXPECT_EQ(dev.ordinal, 0);
  EXPECT_FALSE(dev.name.empty());
  EXPECT_GE(dev.sm_major, 7);
  EXPECT_GT(dev.sm_count, 0);
  EXPECT_GE(dev.smem_per_block_optin, 48 * 1024);
  EXPECT_GE(dev.smem_per_sm, dev.smem_per_block_optin);
  EXPECT_GT(dev.l2_bytes, 0);
  EXPECT_GT(dev.global_mem_bytes, int64_t(1) << 30);
  EXPECT_EQ(dev.max_threads_per_block, 1024);
  EXPECT_GT(dev.mem_bus_width, 0);
  std::cout << "[ info ] " << dev.name << " " << dev.arch_name() << ", " << dev.sm_count << " SMs, "
            << dev.smem_per_block_optin << " B smem/block opt-in, " << dev.smem_per_sm << " B smem/SM, L2 "
            << dev.l2_bytes << " B, " << dev.global_mem_bytes << " B, clock " << dev.clock_khz << " kHz, mem clock "
            << dev.mem_clock_khz << " kHz x " << dev.mem_bus_width << " bits; driver "
            << rt::cuda_driver().version_string() << std::endl;
  if (dev.name.find("H200") != std::string::npos || dev.name.find("H100") != std::string::npos) {
    EXPECT_EQ(dev.arch_name(), "sm_90a");
    EXPECT_EQ(dev.smem_per_block_optin, 232448);
    EXPECT_TRUE(dev.cluster_launch);
  }
  EXPECT_EQ(rt::available_devices().size(), static_cast<size_t>(rt::cuda_device_count()) + 1);
}

TEST(CudaGpu, MemoryRoundTrip) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1) << 22}) {
    SCOPED_TRACE(n);
    const Tensor host = random_floats(n, rng);
    const Tensor dev = host.to(Device::cuda(0));
    EXPECT_EQ(dev.device(), Device::cuda(0));
    EXPECT_EQ(dev.shape(), host.shape());
    EXPECT_EQ(dev.to(Device::cuda(0)).data(), dev.data());  // already there: no copy
    Tensor back = Tensor::empty({n}, DType::F32);
    std::memset(back.data(), 0xff, back.nbytes());  // poison
    back = dev.to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.data(), host.data(), host.nbytes()), 0);
  }
  // zero_ on the device.
  const Tensor dev = random_floats(4097, rng).to(Device::cuda(0));
  dev.zero_();
  const Tensor zeros = dev.to(Device::cpu());
  for (int64_t i = 0; i < zeros.numel(); ++i) ASSERT_EQ(zeros.data_as<float>()[i], 0.0f) << i;
  // Empty tensors have storage and copy as nothing.
  const Tensor none = Tensor::empty({0, 3}, DType::BF16, Device::cuda(0));
  EXPECT_NE(none.data(), nullptr);
  EXPECT_EQ(none.to(Device::cpu()).numel(), 0);
  // Packed fp4: bytes round-trip.
  Tensor f4 = Tensor::empty({7}, DType::F4E2M1);
  for (int i = 0; i < 4; ++i) f4.data_as<uint8_t>()[i] = static_cast<uint8_t>(0x11 * (i + 1));
  EXPECT_EQ(std::memcmp(f4.to(Device::cuda(0)).to(Device::cpu()).data(), f4.data(), 4), 0);
}

TEST(CudaGpu, CopiesBetweenGpus) {
  REQUIRE_GPU();
  if (rt::cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  std::mt19937 rng(std::random_device{}());
  const Tensor host = random_floats(1 << 20, rng);
  const Tensor on1 = host.to(Device::cuda(0)).to(Device::cuda(1));
  EXPECT_EQ(on1.device(), Device::cuda(1));
  EXPECT_EQ(std::memcmp(on1.to(Device::cpu()).data(), host.data(), host.nbytes()), 0);
}

TEST(CudaGpu, OutOfMemoryIsAUserError) {
  REQUIRE_GPU();
  expect_error([] { Tensor::empty({int64_t(1) << 50}, DType::U8, Device::cuda(0)); }, ErrorKind::User,
               "out of GPU memory on cuda:0", "uint8[1125899906842624]");
}

TEST(CudaGpu, VectorAddKernel) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  const int64_t n = (1 << 20) + 3;  // not a multiple of the block
  const Tensor a = random_floats(n, rng), b = random_floats(n, rng);
  const Tensor da = a.to(Device::cuda(0)), db = b.to(Device::cuda(0));
  const Tensor dc = Tensor::empty({n}, DType::F32, Device::cuda(0));
  rt::cuda_memset(0, dptr(dc), 0xff, dc.nbytes());  // poison: NaN
  const CudaKernel vadd = module().function("vadd");
  EXPECT_EQ(vadd.name(), "vadd");
  const unsigned block = 256;
  const Dim3 grid{static_cast<unsigned>((n + block - 1) / block)};
  vadd.launch_with(grid, Dim3{block}, 0, nullptr, dc.data(), da.data(), db.data(), static_cast<long long>(n));
  const Tensor c = dc.to(Device::cpu());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c.data_as<float>()[i], a.data_as<float>()[i] + b.data_as<float>()[i]) << i;
  // The same through cuLaunchKernel's argument array, on a stream of ours.
  rt::CudaStream stream;
  dc.zero_();
  void* c_ptr = dc.data();
  const void* a_ptr = da.data();
  const void* b_ptr = db.data();
  long long count = n;
  void* args[] = {&c_ptr, &a_ptr, &b_ptr, &count};
  vadd.launch(grid, Dim3{block}, 0, stream.handle(), args);
  stream.synchronize();
  EXPECT_EQ(dc.to(Device::cpu()).data_as<float>()[n - 1], a.data_as<float>()[n - 1] + b.data_as<float>()[n - 1]);
}

TEST(CudaGpu, PtxModulesAreJitCompiledByTheDriver) {
  REQUIRE_GPU();
  rt::NvrtcOptions options;
  options.arch = rt::cuda_device(0).arch_name();
  options.want_cubin = false;
  const rt::NvrtcResult ptx = rt::compile_cuda(kKernels, "cuda_gpu_test.cu", {}, options);
  ASSERT_TRUE(ptx.cubin.empty());
  const CudaModule m = CudaModule::load(ptx, "ptx_module");
  const Tensor out = Tensor::empty({4}, DType::F32, Device::cuda(0));
  const Tensor ones = Tensor::empty({4}, DType::F32);
  for (int i = 0; i < 4; ++i) ones.data_as<float>()[i] = 1.5f;
  const Tensor d1 = ones.to(Device::cuda(0));
  m.function("vadd").launch_with(Dim3{1}, Dim3{32}, 0, nullptr, out.data(), d1.data(), d1.data(), 4LL);
  EXPECT_EQ(out.to(Device::cpu()).data_as<float>()[3], 3.0f);
  expect_error([&] { m.function("no_such_kernel"); }, ErrorKind::Internal, "no kernel named 'no_such_kernel'");
  expect_error([] { CudaModule("this is not PTX", "garbage"); }, ErrorKind::Internal, "cuModuleLoadData",
               "module garbage");
}

TEST(CudaGpu, LargeDynamicSharedMemoryIsOptedInto) {
  REQUIRE_GPU();
  const rt::CudaDeviceInfo& dev = rt::cuda_device(0);
  const CudaKernel k = module().function("big_smem");
  const int words = static_cast<int>(dev.smem_per_block_optin / 4);  // all of it
  const Tensor out = Tensor::empty({256}, DType::I32, Device::cuda(0));
  k.launch_with(Dim3{1}, Dim3{256}, static_cast<size_t>(words) * 4, nullptr, out.data(), words);
  const Tensor host = out.to(Device::cpu());
  uint64_t total = 0;
  for (int t = 0; t < 256; ++t) total += static_cast<uint32_t>(host.data_as<int32_t>()[t]);
  EXPECT_EQ(total % (uint64_t(1) << 32), (uint64_t(words) * (words - 1) / 2) % (uint64_t(1) << 32));
  expect_error([&] { k.launch_with(Dim3{1}, Dim3{256}, dev.smem_per_block_optin + 1024, nullptr, out.data(), 1); },
               ErrorKind::User, "kernel 'big_smem' needs", "bytes of dynamic shared memory", "one block may use");
  expect_error([&] { k.launch_with(Dim3{1}, Dim3{2048}, 0, nullptr, out.data(), 1); }, ErrorKind::User,
               "kernel 'big_smem': a block of (2048, 1, 1) = 2048 threads");
  expect_error([&] { k.launch_with(Dim3{0}, Dim3{32}, 0, nullptr, out.data(), 1); }, ErrorKind::User,
               "kernel 'big_smem': empty grid");
}

// An overlapping launch runs (overlapped on sm_90+, an ordinary launch before), waits for nothing
// it should not, and the stream's completion covers both kernels.
TEST(CudaGpu, OverlappingLaunch) {
  REQUIRE_GPU();
  const Tensor flag = Tensor::empty({2}, DType::I32, Device::cuda(0));
  rt::cuda_memset(0, dptr(flag), 0, flag.nbytes());
  rt::CudaStream stream;  // ordered after the memset (legacy default stream)
  module().function("pdl_first").launch_with(Dim3{1}, Dim3{32}, 0, stream.handle(), flag.data());
  module().function("pdl_second").launch_overlapping_with(Dim3{1}, Dim3{32}, 0, stream.handle(), flag.data());
  stream.synchronize();
  const Tensor host = flag.to(Device::cpu());
  EXPECT_EQ(host.data_as<int32_t>()[0], 1);
  EXPECT_EQ(host.data_as<int32_t>()[1], 1);
}

TEST(CudaGpu, ClusterLaunch) {
  REQUIRE_GPU();
  if (!rt::cuda_device(0).cluster_launch) GTEST_SKIP() << "no thread-block clusters before sm_90";
  const CudaKernel k = module().function("cluster_rank");
  const Tensor out = Tensor::empty({16}, DType::I32, Device::cuda(0));
  void* out_ptr = out.data();
  void* args[] = {&out_ptr};
  for (unsigned cluster : {2u, 4u, 16u}) {
    SCOPED_TRACE(cluster);
    rt::cuda_memset(0, dptr(out), 0xff, out.nbytes());
    k.launch_cluster(Dim3{16}, Dim3{32}, Dim3{cluster}, 0, nullptr, args);
    const Tensor host = out.to(Device::cpu());
    for (unsigned b = 0; b < 16; ++b)
      EXPECT_EQ(static_cast<unsigned>(host.data_as<int32_t>()[b]), 100 * (b % cluster) + cluster) << b;
  }
  expect_error([&] { k.launch_cluster(Dim3{6}, Dim3{32}, Dim3{4}, 0, nullptr, args); }, ErrorKind::User,
               "the cluster (4, 1, 1) does not divide the grid (6, 1, 1)");
}

// c = a + a over 2^24 floats: the kernel the timing tests time.
struct Vadd {
  static constexpr int64_t n = int64_t(1) << 24;
  Tensor a = Tensor::empty({n}, DType::F32, Device::cuda(0)), c = Tensor::empty({n}, DType::F32, Device::cuda(0));
  CudaKernel kernel = module().function("vadd");
  Vadd() { a.zero_(); }
  void launch(rt::CuStream s) const {
    kernel.launch_with(Dim3{static_cast<unsigned>(n / 256)}, Dim3{256}, 0, s, c.data(), a.data(), a.data(), static_cast<long long>(n));
  }
};

TEST(CudaGpu, EventTimingIsPositive) {
  REQUIRE_GPU();
  const Vadd vadd;
  rt::CudaStream stream;
  rt::CudaEvent start, end;
  start.record(stream.handle());
  vadd.launch(stream.handle());
  end.record(stream.handle());
  EXPECT_GT(rt::CudaEvent::elapsed_ms(start, end), 0.0);

  rt::CudaTimer timer(stream.handle(), 0, {2, 7, true});
  const rt::CudaTiming t = timer.time([&](rt::CuStream s) { vadd.launch(s); });
  ASSERT_EQ(t.samples_ms.size(), 7u);
  EXPECT_GT(t.median_ms, 0.0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_LE(t.median_ms, t.max_ms);
  std::cout << "[ info ] vadd of 2^24 floats: median " << t.median_ms << " ms ("
            << 3.0 * 4 * Vadd::n / (t.median_ms * 1e-3) / 1e9 << " GB/s)" << std::endl;
}

// Interleaved timing: one timing per callable, `repeat` samples each, and a callable that launches
// the same kernel four times reads longer than one that launches it once.
TEST(CudaGpu, InterleavedTimingKeepsTheCallablesApart) {
  REQUIRE_GPU();
  const Vadd vadd;
  rt::CudaStream stream;
  auto launches = [&](int times) {
    return [&, times](rt::CuStream s) {
      for (int i = 0; i < times; ++i) vadd.launch(s);
    };
  };
  rt::CudaTimer timer(stream.handle(), 0, {1, 5, false});
  const std::vector<rt::CudaTiming> t = timer.time_interleaved({launches(1), launches(4)});
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(t[0].samples_ms.size(), 5u);
  ASSERT_EQ(t[1].samples_ms.size(), 5u);
  EXPECT_GT(t[1].median_ms, 2.5 * t[0].median_ms) << "one launch " << t[0].median_ms << " ms, four " << t[1].median_ms << " ms";
  EXPECT_THROW(timer.time_interleaved({}), rt::Error);
}

TEST(CudaGpu, OtherThreadsGetTheContext) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  const Tensor host = random_floats(1 << 16, rng);
  Tensor back;
  std::string error;
  std::thread worker([&] {
    try {
      back = host.to(Device::cuda(0)).to(Device::cpu());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  worker.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.nbytes()), 0);
}

// The expected shared-memory image of a 64x64 bf16 box under the 128-byte swizzle: within each row
// of 128 bytes, 16-byte chunk j is stored at chunk j ^ (row % 8).
size_t swizzled_128b_offset(int row, int col) {
  const int byte = col * 2;
  return static_cast<size_t>(row) * 128 + static_cast<size_t>(((byte / 16) ^ (row % 8)) * 16 + byte % 16);
}

TEST(CudaGpu, TensorMapEncodeAndTmaLoad) {
  REQUIRE_GPU();
  if (rt::cuda_device(0).sm_major < 9) GTEST_SKIP() << "TMA needs sm_90";
  const int64_t rows = 1024, cols = 1024;
  Tensor host = Tensor::empty({rows, cols}, DType::BF16);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) host.data_as<uint16_t>()[r * cols + c] = static_cast<uint16_t>(r * 31 + c * 7);
  const Tensor dev = host.to(Device::cuda(0));
  const Tensor out = Tensor::empty({64, 64}, DType::BF16, Device::cuda(0));
  const CudaKernel k = module().function("tma_load");
  const int x0 = 128, y0 = 320;  // box origin: column, row
  for (rt::TmaSwizzle swizzle : {rt::TmaSwizzle::None, rt::TmaSwizzle::B128}) {
    SCOPED_TRACE(rt::swizzle_span_bytes(swizzle));
    const rt::TensorMapSpec spec = rt::tensor_map_spec("A", dev, {64, 64}, swizzle);
    const rt::CuTensorMap map = rt::encode_tensor_map(spec);
    bool nonzero = false;
    for (uint64_t w : map.opaque) nonzero |= w != 0;
    EXPECT_TRUE(nonzero);
    rt::cuda_memset(0, dptr(out), 0xff, out.nbytes());
    k.launch_with(Dim3{1}, Dim3{128}, 64 * 64 * 2, nullptr, map, out.data(), x0, y0);
    const Tensor tile = out.to(Device::cpu());
    const auto* bytes = static_cast<const unsigned char*>(tile.data());
    int wrong = 0;
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        const size_t offset =
            swizzle == rt::TmaSwizzle::None ? static_cast<size_t>(r * 128 + c * 2) : swizzled_128b_offset(r, c);
        uint16_t got;
        std::memcpy(&got, bytes + offset, 2);
        wrong += got != host.data_as<uint16_t>()[(y0 + r) * cols + (x0 + c)];
      }
    EXPECT_EQ(wrong, 0);
  }
  // The driver's own checks back ours: a misaligned base fails in validation, before the driver.
  const rt::TensorMapSpec bad = rt::tensor_map_spec_2d("A", DType::BF16, static_cast<char*>(dev.data()) + 2, 1024, 1024,
                                                       2048, 64, 64, rt::TmaSwizzle::B128);
  expect_error([&] { rt::encode_tensor_map(bad); }, ErrorKind::User, "not 16-byte aligned");
}

// In a child process (a fault leaves the context unusable): launches the faulting kernel, then
// makes the fault surface; exits 3 after printing the error, 4 if there was none.
void fault_and_report(bool sync_each_launch) {
  if (sync_each_launch) ::setenv("TL_CUDA_SYNC", "1", 1);
  try {
    const CudaKernel k = module().function("fault");
    k.launch_with(Dim3{1}, Dim3{1}, 0, nullptr, reinterpret_cast<int*>(uintptr_t{16}));
    Tensor::empty({1}, DType::F32, Device::cuda(0)).to(Device::cpu());  // the fault surfaces by now
  } catch (const rt::Error& e) {
    std::cerr << (e.kind() == ErrorKind::Internal ? "internal: " : "user: ") << e.what() << std::endl;
    std::_Exit(3);
  }
  std::_Exit(4);
}

TEST(CudaGpuDeathTest, KernelFaultsNameTheKernel) {
  REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: CUDA does not survive fork
  EXPECT_EXIT(fault_and_report(false), testing::ExitedWithCode(3),
              "internal: .*CUDA_ERROR_ILLEGAL_ADDRESS.*the last kernel launched was 'fault'.*restart the process");
  EXPECT_EXIT(fault_and_report(true), testing::ExitedWithCode(3),
              "internal: .*CUDA error in cuStreamSynchronize \\(after kernel 'fault'\\).*CUDA_ERROR_ILLEGAL_ADDRESS");
}

}  // namespace
