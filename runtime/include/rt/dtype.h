// Element types of the whole stack: names, sizes and their DLPack codes. Numeric conversions of the
// narrow formats live in device/ (tl/device/numeric.h), which host and device code share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rt {

enum class DType : uint8_t {
  Bool,
  I8,
  U8,
  I32,
  I64,
  F16,
  BF16,
  F32,
  F64,
  F8E4M3,  // float8 e4m3 (fn: no infinities, one NaN encoding), max 448
  F8E5M2,  // float8 e5m2, IEEE-like, max 57344
  F4E2M1,  // float4 e2m1, two per byte (low nibble first), max 6
  UE8M0,   // unsigned power-of-two scale factor: value = 2^(bits - 127)
};

struct DTypeInfo {
  DType dtype;
  const char* name;       // canonical name, TileLang spelling ("float16")
  const char* short_name; // "f16"
  int bits;               // storage bits of one element
  bool is_float;          // float-like (all floating and scale formats)
  bool is_signed_int;
  uint8_t dlpack_code;    // DLDataTypeCode
  uint8_t dlpack_bits;
};

const DTypeInfo& info(DType dtype);
inline const char* name(DType dtype) { return info(dtype).name; }
inline int bits(DType dtype) { return info(dtype).bits; }
inline bool is_float(DType dtype) { return info(dtype).is_float; }
inline bool is_int(DType dtype) { return !info(dtype).is_float && dtype != DType::Bool; }
// Bytes needed for `count` elements (F4E2M1 packs two per byte).
inline int64_t storage_bytes(DType dtype, int64_t count) { return (count * bits(dtype) + 7) / 8; }

// Accepts TileLang/PyTorch/NumPy spellings: "float16", "fp16", "half", "FP16", "f16", "bfloat16",
// "float8_e4m3", "e4m3", "float", "int32", ... Case-insensitive.
std::optional<DType> parse_dtype(std::string_view text);
std::optional<DType> from_dlpack(uint8_t code, uint8_t bits);

}  // namespace rt
