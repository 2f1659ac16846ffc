#include "rt/dtype.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "rt/dlpack.h"
#include "rt/error.h"

namespace rt {
namespace {

// DLPack codes from rt/dlpack.h. UE8M0 is DLPack's float8_e8m0fnu; F4E2M1 has bits 4 (packed).
constexpr DTypeInfo kInfos[] = {
    {DType::Bool, "bool", "bool", 8, false, false, kDLBool, 8},
    {DType::I8, "int8", "i8", 8, false, true, kDLInt, 8},
    {DType::U8, "uint8", "u8", 8, false, false, kDLUInt, 8},
    {DType::I32, "int32", "i32", 32, false, true, kDLInt, 32},
    {DType::I64, "int64", "i64", 64, false, true, kDLInt, 64},
    {DType::F16, "float16", "f16", 16, true, false, kDLFloat, 16},
    {DType::BF16, "bfloat16", "bf16", 16, true, false, kDLBfloat, 16},
    {DType::F32, "float32", "f32", 32, true, false, kDLFloat, 32},
    {DType::F64, "float64", "f64", 64, true, false, kDLFloat, 64},
    {DType::F8E4M3, "float8_e4m3", "f8e4m3", 8, true, false, kDLFloat8_e4m3fn, 8},
    {DType::F8E5M2, "float8_e5m2", "f8e5m2", 8, true, false, kDLFloat8_e5m2, 8},
    {DType::F4E2M1, "float4_e2m1", "f4e2m1", 4, true, false, kDLFloat4_e2m1fn, 4},
    {DType::UE8M0, "ue8m0", "ue8m0", 8, true, false, kDLFloat8_e8m0fnu, 8},
};

struct Alias {
  const char* spelling;
  DType dtype;
};
constexpr Alias kAliases[] = {
    {"bool", DType::Bool},          {"int8", DType::I8},           {"i8", DType::I8},
    {"uint8", DType::U8},           {"u8", DType::U8},             {"int32", DType::I32},
    {"i32", DType::I32},            {"int", DType::I32},           {"int64", DType::I64},
    {"i64", DType::I64},            {"float16", DType::F16},       {"fp16", DType::F16},
    {"f16", DType::F16},            {"half", DType::F16},          {"bfloat16", DType::BF16},
    {"bf16", DType::BF16},          {"float32", DType::F32},       {"fp32", DType::F32},
    {"f32", DType::F32},            {"float", DType::F32},         {"float64", DType::F64},
    {"fp64", DType::F64},           {"f64", DType::F64},           {"double", DType::F64},
    {"float8_e4m3", DType::F8E4M3}, {"float8_e4m3fn", DType::F8E4M3}, {"e4m3", DType::F8E4M3},
    {"fp8_e4m3", DType::F8E4M3},    {"f8e4m3", DType::F8E4M3},     {"fp8", DType::F8E4M3},
    {"float8_e5m2", DType::F8E5M2}, {"e5m2", DType::F8E5M2},       {"fp8_e5m2", DType::F8E5M2},
    {"f8e5m2", DType::F8E5M2},      {"float4_e2m1", DType::F4E2M1}, {"float4_e2m1fn", DType::F4E2M1},
    {"e2m1", DType::F4E2M1},        {"fp4", DType::F4E2M1},        {"f4e2m1", DType::F4E2M1},
    {"ue8m0", DType::UE8M0},        {"float8_e8m0fnu", DType::UE8M0},
};

}  // namespace

const DTypeInfo& info(DType dtype) {
  for (const DTypeInfo& i : kInfos)
    if (i.dtype == dtype) return i;
  RT_UNREACHABLE("unknown dtype ", static_cast<int>(dtype));
}

std::optional<DType> parse_dtype(std::string_view text) {
  std::string lower;
  std::transform(text.begin(), text.end(), std::back_inserter(lower),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const Alias& a : kAliases)
    if (lower == a.spelling) return a.dtype;
  return std::nullopt;
}

std::optional<DType> from_dlpack(uint8_t code, uint8_t bits) {
  for (const DTypeInfo& i : kInfos)
    if (i.dlpack_code == code && i.dlpack_bits == bits) return i.dtype;
  return std::nullopt;
}

}  // namespace rt
