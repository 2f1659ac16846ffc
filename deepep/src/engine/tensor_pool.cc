#include "engine/tensor_pool.h"

#include <sys/mman.h>

#include <cstdlib>

#include "rt/cuda_memory.h"
#include "rt/error.h"

namespace deepep {
namespace {

constexpr size_t kHuge = 2u << 20;
constexpr size_t kMaxCached = size_t(8) << 30;  // free blocks kept beyond this are returned to the system

size_t capacity_for(size_t bytes) {
  if (bytes >= kHuge / 2) return (bytes + kHuge - 1) / kHuge * kHuge;
  size_t c = 4096;
  while (c < bytes) c *= 2;
  return c;
}

void release(const rt::Device& device, void* block) {
  if (device.is_cpu())
    std::free(block);
  else
    rt::cuda_free(device.id, reinterpret_cast<rt::CuDevicePtr>(block));
}

}  // namespace

TensorPool::State::~State() {
  for (auto& [cap, p] : free) release(device, p);
}

TensorPool::TensorPool(rt::Device device) : state_(std::make_shared<State>()) { state_->device = device; }

size_t TensorPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cached;
}

rt::Tensor TensorPool::empty(const rt::Shape& shape, rt::DType dtype) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    RT_USER_CHECK(d >= 0, "deepep: negative dimension");
    numel *= d;
  }
  const size_t bytes = size_t(rt::storage_bytes(dtype, numel));
  const size_t cap = capacity_for(std::max<size_t>(bytes, 1));
  void* block = nullptr;
  size_t got = cap;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    // A free block at least this large but not wastefully larger.
    auto it = state_->free.lower_bound(cap);
    if (it != state_->free.end() && it->first <= 2 * cap) {
      block = it->second;
      got = it->first;
      state_->cached -= it->first;
      state_->free.erase(it);
    }
  }
  const rt::Device device = state_->device;
  if (!block && device.is_cuda()) {
    block = reinterpret_cast<void*>(rt::cuda_malloc(device.id, cap, rt::str("deepep output ", rt::name(dtype))));
  } else if (!block) {
    block = std::aligned_alloc(cap >= kHuge ? kHuge : 64, cap);
    RT_USER_CHECK(block != nullptr, "deepep: out of host memory allocating ", cap, " bytes");
    if (cap >= kHuge) madvise(block, cap, MADV_HUGEPAGE);
  }
  std::shared_ptr<State> state = state_;
  std::shared_ptr<void> owner(block, [state, got](void* p) {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->cached + got > kMaxCached) {
      release(state->device, p);
      return;
    }
    state->free.emplace(got, p);
    state->cached += got;
  });
  return rt::Tensor::wrap(block, shape, dtype, device, {}, std::move(owner));
}

}  // namespace deepep
