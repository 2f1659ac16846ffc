#include "rt/tensor.h"

#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "rt/cuda_driver.h"
#include "rt/cuda_memory.h"
#include "rt/error.h"

namespace rt {
namespace {

constexpr int64_t kHostAlignment = 64;  // a cache line and an AVX-512 vector
constexpr size_t kHostCacheMinBytes = size_t(4) << 20;  // host blocks from here on are cached when freed

std::string describe(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Element count of `shape`, with the checks every constructor shares; `where` names the caller.
int64_t checked_numel(const Shape& shape, const char* where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    RT_USER_CHECK(d >= 0, where, ": negative dimension in shape ", describe(shape));
    RT_USER_CHECK(!__builtin_mul_overflow(n, d, &n), where, ": shape ", describe(shape),
                  " has more than 2^63 elements");
  }
  return n;
}

// Freed large host blocks, kept for the next allocation of about the same size (the way PyTorch's
// caching allocator keeps device memory). Without it every large tensor is fresh memory from the
// kernel, and touching it costs a page fault per 4 KiB: for deepep's dispatch, whose outputs are new
// on every call, those faults were about 40% of the processes' CPU time. Bounded (kHostCacheBytes);
// never destroyed, so tensors alive at exit can still return their blocks.
class HostBlockCache {
 public:
  static HostBlockCache& instance() {
    static HostBlockCache* cache = [] {
      auto* c = new HostBlockCache;
      // A fork while another thread holds the lock would leave the child's copy locked forever.
      pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                     [] { instance().mutex_.unlock(); });
      return c;
    }();
    return *cache;
  }
  // A cached block of `bytes` to at most twice that, or null.
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > 2 * bytes) return nullptr;
    void* p = it->second.first;
    sizes_[p] = it->first;
    cached_ -= it->first;
    free_.erase(it);
    return p;
  }
  // Records the size of a block it did not hand out (fresh from aligned_alloc).
  void track(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = bytes;
  }
  void give(void* p) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = sizes_.find(p);
    const size_t bytes = it->second;
    sizes_.erase(it);
    if (cached_ + bytes <= kHostCacheBytes) {
      free_.emplace(bytes, std::make_pair(p, bytes));
      cached_ += bytes;
      return;
    }
    lock.unlock();
    std::free(p);
  }

 private:
  static constexpr size_t kHostCacheBytes = size_t(1) << 30;
  std::mutex mutex_;
  std::multimap<size_t, std::pair<void*, size_t>> free_;  // size -> block
  std::unordered_map<void*, size_t> sizes_;                // blocks handed out -> their size
  size_t cached_ = 0;
};

std::shared_ptr<void> allocate(int64_t bytes, Device device, const Shape& shape, DType dtype) {
  switch (device.kind) {
    case Device::Kind::CPU: {
      // aligned_alloc wants a multiple of the alignment; never zero so the pointer is never null.
      const int64_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
      const size_t size = static_cast<size_t>(rounded > 0 ? rounded : kHostAlignment);
      if (size >= kHostCacheMinBytes) {
        HostBlockCache& cache = HostBlockCache::instance();
        void* p = cache.take(size);
        if (!p) {
          p = std::aligned_alloc(kHostAlignment, size);
          RT_USER_CHECK(p != nullptr, "Tensor::empty: out of host memory allocating ", bytes, " bytes for ",
                        name(dtype), describe(shape));
          cache.track(p, size);
        }
        return std::shared_ptr<void>(p, [](void* q) { HostBlockCache::instance().give(q); });
      }
      void* p = std::aligned_alloc(kHostAlignment, size);
      RT_USER_CHECK(p != nullptr, "Tensor::empty: out of host memory allocating ", bytes, " bytes for ", name(dtype),
                    describe(shape));
      return std::shared_ptr<void>(p, std::free);
    }
    case Device::Kind::CUDA: {
      RT_USER_CHECK(device.id >= 0, "Tensor::empty: negative CUDA device ordinal ", device.id);
      const int id = device.id;
      if (!cuda_driver_available())
        throw_user_error(str("Tensor::empty on ", device.to_string(), ": ", cuda_driver_error()));
      const CuDevicePtr p = cuda_malloc(id, static_cast<size_t>(bytes), str(name(dtype), describe(shape)));
      // The deleter never throws (cuda_free swallows errors, e.g. a driver shut down at exit).
      return std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<uintptr_t>(p)), [id](void* q) {
        cuda_free(id, static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(q)));
      });
    }
  }
  RT_UNREACHABLE("device kind ", static_cast<int>(device.kind));
}

const char* dl_device_name(int32_t type) {
  switch (type) {
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLVPI: return "VPI";
    case kDLROCM: return "ROCm";
    case kDLROCMHost: return "ROCm host";
    case kDLExtDev: return "ext_dev";
    case kDLOneAPI: return "oneAPI";
    case kDLWebGPU: return "WebGPU";
    case kDLHexagon: return "Hexagon";
    case kDLMAIA: return "MAIA";
    default: return "unknown";
  }
}

Device device_from_dlpack(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory is plain host memory to the CPU
      return Device::cpu();
    case kDLCUDA:
    case kDLCUDAManaged:  // managed memory is addressable from its GPU
      return Device::cuda(d.device_id);
    default:
      throw_user_error(str("from_dlpack: tensors on DLPack device type ", static_cast<int32_t>(d.device_type), " (",
                           dl_device_name(d.device_type), ") are not supported; only CPU and CUDA memory"));
  }
}

// What a DLManagedTensor from to_dlpack() owns: the storage reference and the shape/stride arrays.
struct DLPackExport {
  DLManagedTensor managed;
  std::shared_ptr<void> storage;
  Shape shape;
  Shape strides;
};

}  // namespace

std::string Device::to_string() const { return kind == Kind::CPU ? std::string("cpu") : "cuda:" + std::to_string(id); }

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

Tensor::Tensor(std::shared_ptr<void> storage, void* data, Device device, DType dtype, Shape shape, Shape strides,
               int64_t numel)
    : defined_(true),
      storage_(std::move(storage)),
      data_(data),
      device_(device),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      numel_(numel) {}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  const int64_t numel = checked_numel(shape, "Tensor::empty");
  RT_USER_CHECK(numel <= std::numeric_limits<int64_t>::max() / 64, "Tensor::empty: ", describe(shape),
                " is too large to allocate");
  std::shared_ptr<void> storage = allocate(storage_bytes(dtype, numel), device, shape, dtype);
  void* data = storage.get();
  Shape strides = contiguous_strides(shape);
  return Tensor(std::move(storage), data, device, dtype, std::move(shape), std::move(strides), numel);
}

Tensor Tensor::wrap(void* data, Shape shape, DType dtype, Device device, Shape strides,
                    std::shared_ptr<void> keep_alive) {
  const int64_t numel = checked_numel(shape, "Tensor::wrap");
  RT_USER_CHECK(data != nullptr || numel == 0, "Tensor::wrap: null data pointer for a ", name(dtype), describe(shape),
                " tensor with ", numel, " elements");
  if (strides.empty()) strides = contiguous_strides(shape);
  RT_USER_CHECK(strides.size() == shape.size(), "Tensor::wrap: ", strides.size(), " strides ", describe(strides),
                " for the ", shape.size(), "-d shape ", describe(shape));
  return Tensor(std::move(keep_alive), data, device, dtype, std::move(shape), std::move(strides), numel);
}

Tensor Tensor::from_dlpack(DLManagedTensor* managed) {
  RT_USER_CHECK(managed != nullptr, "from_dlpack: null DLManagedTensor");
  // Own it first, so the deleter runs exactly once whether or not the import below succeeds.
  std::shared_ptr<void> owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  const DLTensor& t = managed->dl_tensor;
  const Device device = device_from_dlpack(t.device);
  RT_USER_CHECK(t.dtype.lanes == 1, "from_dlpack: vector dtypes are not supported (lanes = ", t.dtype.lanes, ", code ",
                int(t.dtype.code), ", bits ", int(t.dtype.bits), ")");
  const std::optional<DType> dtype = rt::from_dlpack(t.dtype.code, t.dtype.bits);
  RT_USER_CHECK(dtype.has_value(), "from_dlpack: unsupported DLPack dtype (code ", int(t.dtype.code), ", bits ",
                int(t.dtype.bits),
                "); supported: bool, int8, uint8, int32, int64, float16, bfloat16, float32, "
                "float64, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float4_e2m1fn");
  RT_USER_CHECK(t.ndim >= 0, "from_dlpack: negative ndim ", t.ndim);
  RT_USER_CHECK(t.ndim == 0 || t.shape != nullptr, "from_dlpack: null shape for a ", t.ndim, "-d tensor");
  Shape shape(t.shape, t.shape + t.ndim);
  Shape strides = t.strides ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  const int64_t numel = checked_numel(shape, "from_dlpack");
  RT_USER_CHECK(t.data != nullptr || numel == 0, "from_dlpack: null data pointer for ", describe(shape));
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return Tensor(std::move(owner), data, device, *dtype, std::move(shape), std::move(strides), numel);
}

DLManagedTensor* Tensor::to_dlpack() const {
  check_defined("to_dlpack");
  auto* ctx = new DLPackExport{{}, storage_, shape_, strides_};
  DLTensor& t = ctx->managed.dl_tensor;
  // Like PyTorch, the data pointer is the first element and byte_offset is 0.
  t.data = data_;
  t.device = device_.is_cpu() ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device_.id};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = DLDataType{info(dtype_).dlpack_code, info(dtype_).dlpack_bits, 1};
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackExport*>(self->manager_ctx); };
  return &ctx->managed;
}

void Tensor::check_defined(const char* what) const {
  RT_USER_CHECK(defined_, "Tensor::", what, " on an undefined tensor");
}

void Tensor::check_element_type(size_t element_bytes) const {
  check_defined("data_as");
  const int b = bits(dtype_);
  // Packed sub-byte types are reached through their bytes.
  RT_USER_CHECK(element_bytes * 8 == static_cast<size_t>(b) || (b < 8 && element_bytes == 1),
                "Tensor::data_as: ", name(dtype_), " elements are ", b, " bits, not ", element_bytes * 8);
}

void* Tensor::data() const {
  check_defined("data");
  return data_;
}

DType Tensor::dtype() const {
  check_defined("dtype");
  return dtype_;
}

Device Tensor::device() const {
  check_defined("device");
  return device_;
}

const Shape& Tensor::shape() const {
  check_defined("shape");
  return shape_;
}

const Shape& Tensor::strides() const {
  check_defined("strides");
  return strides_;
}

int64_t Tensor::dim() const {
  check_defined("dim");
  return static_cast<int64_t>(shape_.size());
}

int64_t Tensor::size(int64_t i) const {
  const int64_t n = dim();
  RT_USER_CHECK(i >= -n && i < n, "Tensor::size: dimension ", i, " is out of range for the ", n, "-d tensor ",
                describe(shape_));
  return shape_[i < 0 ? i + n : i];
}

int64_t Tensor::stride(int64_t i) const {
  const int64_t n = dim();
  RT_USER_CHECK(i >= -n && i < n, "Tensor::stride: dimension ", i, " is out of range for the ", n, "-d tensor ",
                describe(shape_));
  return strides_[i < 0 ? i + n : i];
}

int64_t Tensor::numel() const {
  check_defined("numel");
  return numel_;
}

int64_t Tensor::nbytes() const { return storage_bytes(dtype(), numel()); }

bool Tensor::is_contiguous() const {
  check_defined("is_contiguous");
  if (numel_ == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;  // the stride of a size-1 dimension never matters
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

int Tensor::element_size_bits() const { return bits(dtype()); }

Tensor Tensor::to(Device target) const {
  check_defined("to");
  if (target == device_) return *this;
  RT_USER_CHECK(is_contiguous(), "Tensor::to(", target.to_string(), "): the ", name(dtype_), describe(shape_),
                " tensor on ", device_.to_string(), " has strides ", describe(strides_),
                " and is not contiguous; only contiguous tensors are copied between devices (make it "
                "contiguous first)");
  Tensor out = empty(shape_, dtype_, target);
  const size_t bytes = static_cast<size_t>(nbytes());
  const auto dptr = [](const void* p) { return static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(p)); };
  if (device_.is_cpu() && target.is_cuda()) {
    cuda_copy_to_device(target.id, dptr(out.data_), data_, bytes);
  } else if (device_.is_cuda() && target.is_cpu()) {
    cuda_copy_to_host(device_.id, out.data_, dptr(data_), bytes);
  } else if (device_.is_cuda() && target.is_cuda()) {
    cuda_copy_device_to_device(target.id, dptr(out.data_), device_.id, dptr(data_), bytes);
  } else {
    RT_UNREACHABLE("Tensor::to from ", device_.to_string(), " to ", target.to_string());
  }
  return out;
}

void Tensor::zero_() const {
  check_defined("zero_");
  RT_USER_CHECK(is_contiguous(), "Tensor::zero_: the ", name(dtype_), describe(shape_), " tensor with strides ",
                describe(strides_), " is not contiguous");
  const size_t bytes = static_cast<size_t>(nbytes());
  if (bytes == 0) return;
  if (device_.is_cpu())
    std::memset(data_, 0, bytes);
  else
    cuda_memset(device_.id, static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(data_)), 0, bytes);
}

std::string Tensor::shape_string() const {
  check_defined("shape_string");
  return describe(shape_);
}

}  // namespace rt
