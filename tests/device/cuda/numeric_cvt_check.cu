// Manual check of tl/device/numeric.h against NVIDIA's conversions (not part of the CMake build):
//   nvcc -std=c++20 -arch=sm_90a -I device/include tests/device/cuda/numeric_cvt_check.cu -o /tmp/cvt_check
//   /tmp/cvt_check            # exit status 0 = every conversion matched
// 1. Host: tl:: conversions vs the host implementations in cuda_fp16/bf16/fp8/fp4.h.
// 2. Device (when a GPU is present): tl:: conversions compiled for the device, and the hardware
//    cvt instructions (through the same cuda_fp*.h functions), vs tl:: on the host.
// NaN inputs only need to give a NaN (half/bf16 keep payloads where NVIDIA canonicalises).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tl/device/numeric.h"

namespace {

enum { kHalf, kBf16, kE4M3, kE5M2, kE5M2Sat, kE2M1, kUe8m0Ceil, kNumOut };
const char* kNames[kNumOut] = {"half", "bf16", "e4m3 satfinite", "e5m2", "e5m2 satfinite", "e2m1", "ue8m0 ceil"};

struct Out {
  unsigned v[kNumOut];
};

__host__ __device__ Out tl_convert(float x) {
  Out o;
  o.v[kHalf] = tl::from_float<tl::half_t>(x).bits;
  o.v[kBf16] = tl::from_float<tl::bfloat16_t>(x).bits;
  o.v[kE4M3] = tl::from_float<tl::float8_e4m3_t>(x).bits;
  o.v[kE5M2] = tl::from_float<tl::float8_e5m2_t>(x).bits;
  o.v[kE5M2Sat] = tl::float8_e5m2_t::from_float_satfinite(x).bits;
  o.v[kE2M1] = tl::float4_e2m1_t::from_float(x).bits;
  o.v[kUe8m0Ceil] = tl::ue8m0_t::from_float_ceil(x).bits;
  return o;
}

__host__ __device__ Out nv_convert(float x) {
  Out o;
  o.v[kHalf] = __half_as_ushort(__float2half_rn(x));
  o.v[kBf16] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  o.v[kE4M3] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  o.v[kE5M2] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  o.v[kE5M2Sat] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  o.v[kE2M1] = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
  o.v[kUe8m0Ceil] = 0;  // no float -> ue8m0 here (cvt.rp.satfinite.ue8m0x2 differs for zero)
  return o;
}

__global__ void convert_kernel(const float* x, Out* tl_out, Out* nv_out, float* decoded, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  tl_out[i] = tl_convert(x[i]);
  nv_out[i] = nv_convert(x[i]);
  if (i < 65536) {
    decoded[4 * i + 0] = tl::half_t::from_bits(uint16_t(i)).to_float();
    decoded[4 * i + 1] = tl::bfloat16_t::from_bits(uint16_t(i)).to_float();
    decoded[4 * i + 2] = tl::float8_e4m3_t::from_bits(uint8_t(i)).to_float();
    decoded[4 * i + 3] = tl::float8_e5m2_t::from_bits(uint8_t(i)).to_float();
  }
}

bool is_nan_pattern(int k, unsigned v) {
  switch (k) {
    case kHalf: return (v & 0x7c00u) == 0x7c00u && (v & 0x3ffu);
    case kBf16: return (v & 0x7f80u) == 0x7f80u && (v & 0x7fu);
    case kE4M3: return (v & 0x7fu) == 0x7fu;
    case kE5M2:
    case kE5M2Sat: return (v & 0x7cu) == 0x7cu && (v & 0x3u);
    default: return false;
  }
}

float ffrom(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool same_float(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (std::isnan(a) && std::isnan(b));
}

}  // namespace

int main() {
  std::vector<float> xs;
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any(0, 0xffffffffu);
  for (uint32_t b = 0; b < 65536; ++b) {
    xs.push_back(tl::half_t::from_bits(uint16_t(b)).to_float());
    xs.push_back(tl::bfloat16_t::from_bits(uint16_t(b)).to_float());
  }
  for (int i = 0; i < 4000000; ++i) {
    uint32_t u = any(rng);
    if (i % 2) u = (u & 0x807fffffu) | ((90u + (u >> 23) % 70u) << 23);  // concentrate on the narrow ranges
    xs.push_back(ffrom(u));
  }
  const int n = int(xs.size());

  long host_bad[kNumOut] = {}, dev_bad[kNumOut] = {}, hw_bad[kNumOut] = {}, decode_bad = 0;
  std::vector<Out> host_tl(n);
  for (int i = 0; i < n; ++i) {
    const float x = xs[i];
    host_tl[i] = tl_convert(x);
    const Out nv = nv_convert(x);
    for (int k = 0; k < kNumOut; ++k) {
      if (k == kUe8m0Ceil) continue;
      const unsigned a = host_tl[i].v[k], b = nv.v[k];
      const bool ok = std::isnan(x) && k != kE2M1 ? is_nan_pattern(k, a) && is_nan_pattern(k, b) : a == b;
      if (!ok && host_bad[k]++ < 3)
        std::printf("host %s: x=%g (0x%08x) tl 0x%x nv 0x%x\n", kNames[k], x, *reinterpret_cast<const uint32_t*>(&x), a, b);
    }
  }

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: device part skipped\n");
  } else {
    float *dx, *ddec;
    Out *dtl, *dnv;
    cudaMalloc(&dx, sizeof(float) * n);
    cudaMalloc(&dtl, sizeof(Out) * n);
    cudaMalloc(&dnv, sizeof(Out) * n);
    cudaMalloc(&ddec, sizeof(float) * 4 * 65536);
    cudaMemcpy(dx, xs.data(), sizeof(float) * n, cudaMemcpyHostToDevice);
    convert_kernel<<<(n + 255) / 256, 256>>>(dx, dtl, dnv, ddec, n);
    std::vector<Out> dev_tl(n), dev_nv(n);
    std::vector<float> dec(4 * 65536);
    cudaMemcpy(dev_tl.data(), dtl, sizeof(Out) * n, cudaMemcpyDeviceToHost);
    cudaMemcpy(dev_nv.data(), dnv, sizeof(Out) * n, cudaMemcpyDeviceToHost);
    cudaMemcpy(dec.data(), ddec, sizeof(float) * 4 * 65536, cudaMemcpyDeviceToHost);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      std::printf("CUDA error: %s\n", cudaGetErrorString(err));
      return 2;
    }
    for (int i = 0; i < n; ++i) {
      const float x = xs[i];
      for (int k = 0; k < kNumOut; ++k) {
        if (dev_tl[i].v[k] != host_tl[i].v[k] && dev_bad[k]++ < 3)
          std::printf("device tl %s: x=%g tl(device) 0x%x tl(host) 0x%x\n", kNames[k], x, dev_tl[i].v[k], host_tl[i].v[k]);
        if (k == kUe8m0Ceil) continue;
        const unsigned a = host_tl[i].v[k], b = dev_nv[i].v[k];
        const bool ok = std::isnan(x) && k != kE2M1 ? is_nan_pattern(k, a) && is_nan_pattern(k, b) : a == b;
        if (!ok && hw_bad[k]++ < 3) std::printf("hardware cvt %s: x=%g tl 0x%x cvt 0x%x\n", kNames[k], x, a, b);
      }
    }
    for (int b = 0; b < 65536; ++b) {
      decode_bad += !same_float(dec[4 * b + 0], tl::half_t::from_bits(uint16_t(b)).to_float());
      decode_bad += !same_float(dec[4 * b + 1], tl::bfloat16_t::from_bits(uint16_t(b)).to_float());
      decode_bad += !same_float(dec[4 * b + 2], tl::float8_e4m3_t::from_bits(uint8_t(b)).to_float());
      decode_bad += !same_float(dec[4 * b + 3], tl::float8_e5m2_t::from_bits(uint8_t(b)).to_float());
    }
  }
  long total = decode_bad;
  std::printf("%d inputs; mismatches:\n%-16s %8s %10s %13s\n", n, "format", "host nv", "device tl", "hardware cvt");
  for (int k = 0; k < kNumOut; ++k) {
    std::printf("%-16s %8ld %10ld %13ld\n", kNames[k], host_bad[k], dev_bad[k], hw_bad[k]);
    total += host_bad[k] + dev_bad[k] + hw_bad[k];
  }
  std::printf("device decode mismatches: %ld\n", decode_bad);
  std::printf(total ? "FAILED\n" : "OK\n");
  return total ? 1 : 0;
}
