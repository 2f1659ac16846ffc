#include "collectives/reduce.h"

#include <algorithm>
#include <cstdint>

#include "rt/error.h"
#include "tl/device/numeric.h"

namespace deepep {
namespace {

template <class T>
struct Traits {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc v) { return v; }
};
template <>
struct Traits<tl::half_t> {
  using Acc = float;
  static float load(tl::half_t v) { return v.to_float(); }
  static tl::half_t store(float v) { return tl::half_t::from_float(v); }
};
template <>
struct Traits<tl::bfloat16_t> {
  using Acc = float;
  static float load(tl::bfloat16_t v) { return v.to_float(); }
  static tl::bfloat16_t store(float v) { return tl::bfloat16_t::from_float(v); }
};

template <class A>
inline A apply(A a, A b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (std::is_integral_v<A>) {
        using U = std::make_unsigned_t<A>;
        return A(U(a) + U(b));  // wraps, like NCCL
      } else {
        return a + b;
      }
    case ReduceOp::Max: return a < b ? b : a;
    case ReduceOp::Min: return b < a ? b : a;
  }
  return a;
}

template <class T, ReduceOp Op>
void ordered(T* out, const std::vector<const void*>& parts, size_t n) {
  using A = typename Traits<T>::Acc;
  constexpr size_t kBlock = 2048;
  A acc[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    const T* p0 = static_cast<const T*>(parts[0]) + b;
    for (size_t i = 0; i < m; ++i) acc[i] = Traits<T>::load(p0[i]);
    for (size_t r = 1; r < parts.size(); ++r) {
      const T* p = static_cast<const T*>(parts[r]) + b;
      for (size_t i = 0; i < m; ++i) acc[i] = apply<A>(acc[i], Traits<T>::load(p[i]), Op);
    }
    for (size_t i = 0; i < m; ++i) out[b + i] = Traits<T>::store(acc[i]);
  }
}

template <class T, ReduceOp Op>
void into(T* dst, const T* src, size_t n) {
  using A = typename Traits<T>::Acc;
  for (size_t i = 0; i < n; ++i) dst[i] = Traits<T>::store(apply<A>(Traits<T>::load(dst[i]), Traits<T>::load(src[i]), Op));
}

template <class T>
void dispatch_ordered(void* out, const std::vector<const void*>& parts, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ordered<T, ReduceOp::Sum>(static_cast<T*>(out), parts, n);
    case ReduceOp::Max: return ordered<T, ReduceOp::Max>(static_cast<T*>(out), parts, n);
    case ReduceOp::Min: return ordered<T, ReduceOp::Min>(static_cast<T*>(out), parts, n);
  }
}

template <class T>
void dispatch_into(void* dst, const void* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return into<T, ReduceOp::Sum>(static_cast<T*>(dst), static_cast<const T*>(src), n);
    case ReduceOp::Max: return into<T, ReduceOp::Max>(static_cast<T*>(dst), static_cast<const T*>(src), n);
    case ReduceOp::Min: return into<T, ReduceOp::Min>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  }
}

}  // namespace

bool reducible(rt::DType d) {
  using rt::DType;
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::I32 || d == DType::I64 ||
         d == DType::F64;
}

void reduce_ordered(void* out, const std::vector<const void*>& parts, size_t n, rt::DType dtype, ReduceOp op) {
  RT_ICHECK(!parts.empty(), "no parts to reduce");
  switch (dtype) {
    case rt::DType::F32: return dispatch_ordered<float>(out, parts, n, op);
    case rt::DType::F64: return dispatch_ordered<double>(out, parts, n, op);
    case rt::DType::F16: return dispatch_ordered<tl::half_t>(out, parts, n, op);
    case rt::DType::BF16: return dispatch_ordered<tl::bfloat16_t>(out, parts, n, op);
    case rt::DType::I32: return dispatch_ordered<int32_t>(out, parts, n, op);
    case rt::DType::I64: return dispatch_ordered<int64_t>(out, parts, n, op);
    default: RT_UNREACHABLE("reduction of ", rt::name(dtype));
  }
}

void reduce_into(void* dst, const void* src, size_t n, rt::DType dtype, ReduceOp op) {
  switch (dtype) {
    case rt::DType::F32: return dispatch_into<float>(dst, src, n, op);
    case rt::DType::F64: return dispatch_into<double>(dst, src, n, op);
    case rt::DType::F16: return dispatch_into<tl::half_t>(dst, src, n, op);
    case rt::DType::BF16: return dispatch_into<tl::bfloat16_t>(dst, src, n, op);
    case rt::DType::I32: return dispatch_into<int32_t>(dst, src, n, op);
    case rt::DType::I64: return dispatch_into<int64_t>(dst, src, n, op);
    default: RT_UNREACHABLE("reduction of ", rt::name(dtype));
  }
}

}  // namespace deepep
