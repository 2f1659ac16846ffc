#include "validate.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "rt/error.h"

namespace deepgemm::detail {
namespace {

constexpr int64_t kBlockK = 128;          // the scale block along K (and the contiguous layout's M block)
constexpr int64_t kTmaAlignBytes = 16;    // TMA: global addresses and strides

std::string shape_str(const rt::Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Without forming a + b - 1, which overflows for sizes near 2^63 (e.g. K of an empty A).
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Whether `elements` elements of `dtype` span a multiple of 16 bytes (every dtype's width divides
// 128 bits; counted in elements, which cannot overflow).
bool stride_aligned(int64_t elements, rt::DType dtype) {
  return elements % (kTmaAlignBytes * 8 / rt::bits(dtype)) == 0;
}

// DG_CHECK(checker, cond, parts...): fails with the message's parts, which are evaluated only when
// the check fails (every call is validated: building the messages eagerly cost microseconds).
#define DG_CHECK(checker, cond, ...)          \
  do {                                        \
    if (!(cond)) (checker).fail(__VA_ARGS__); \
  } while (0)

class Checker {
 public:
  explicit Checker(const std::string& function) : fn_(function) {}

  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    rt::throw_user_error(rt::str("deepgemm::", fn_, ": ", args...));
  }

  void defined(const rt::Tensor& t, const char* name) const {
    DG_CHECK(*this, t.defined(), name, " is an undefined tensor (a tensor is required)");
  }
  void same_device(const rt::Tensor& t, const char* name, const rt::Tensor& ref, const char* ref_name) const {
    DG_CHECK(*this, t.device() == ref.device(), name, " is on ", t.device().to_string(), " but ", ref_name, " is on ",
             ref.device().to_string(), "; all tensors of a call must be on one device");
  }
  // Every tensor given (null ones are skipped) is defined, and on the device of the first.
  void on_one_device(std::initializer_list<std::pair<const rt::Tensor*, const char*>> tensors) const {
    for (const auto& [t, name] : tensors)
      if (t) defined(*t, name);
    const auto& [first, first_name] = *tensors.begin();
    for (const auto& [t, name] : tensors)
      if (t) same_device(*t, name, *first, first_name);
  }
  void dtype(const rt::Tensor& t, const char* name, std::initializer_list<rt::DType> allowed) const {
    for (rt::DType d : allowed)
      if (t.dtype() == d) return;
    std::string list;
    size_t i = 0;
    for (rt::DType d : allowed) {
      if (i) list += i + 1 == allowed.size() ? " or " : ", ";
      list += rt::name(d);
      ++i;
    }
    fail(name, " must be ", list, " (got ", rt::name(t.dtype()), ")");
  }
  void dims(const rt::Tensor& t, const char* name, int64_t nd, const std::string& doc) const {
    DG_CHECK(*this, t.dim() == nd, name, " must be a ", nd, "-d tensor ", doc, " (got shape ", t.shape_string(), ")");
  }
  void shape(const rt::Tensor& t, const char* name, const rt::Shape& want, const std::string& doc) const {
    DG_CHECK(*this, t.shape() == want, name, " must have shape ", doc, " = ", shape_str(want), " (got ",
             t.shape_string(), ")");
  }
  void no_negative_strides(const rt::Tensor& t, const char* name) const {
    for (int64_t s : t.strides())
      DG_CHECK(*this, s >= 0, name, " has a negative stride (strides ", shape_str(t.strides()), "); not supported");
  }
  void aligned(const rt::Tensor& t, const char* name) const {
    DG_CHECK(*this, reinterpret_cast<uintptr_t>(t.data()) % kTmaAlignBytes == 0, name, "'s data pointer ", t.data(),
             " is not 16-byte aligned (TMA needs 16-byte aligned addresses)");
  }
  // The group stride of a 3-d tensor: past one group's matrix, and 16-byte aligned when required.
  void group_stride(const rt::Tensor& t, const char* name, bool require_aligned) const {
    if (t.dim() != 3 || t.size(0) <= 1 || t.size(1) == 0 || t.size(2) == 0) return;
    const int64_t span = (t.size(1) - 1) * t.stride(1) + (t.size(2) - 1) * t.stride(2) + 1;
    DG_CHECK(*this, t.stride(0) >= span, name, "'s groups overlap: stride ", t.stride(0),
             " of dimension 0 is below the ", span, " elements one group spans (strides ", shape_str(t.strides()), ")");
    DG_CHECK(*this, !require_aligned || stride_aligned(t.stride(0), t.dtype()), name, "'s group stride (", t.stride(0),
             " elements) is not a multiple of 16 bytes (TMA); strides ", shape_str(t.strides()));
  }

  // An operand or output as given: last dimension contiguous, the one before it a 16-byte multiple
  // (and past the last one), 16-byte aligned data.
  void operand(const rt::Tensor& t, const char* name) const {
    no_negative_strides(t, name);
    aligned(t, name);
    const int64_t nd = t.dim();
    const int64_t rows = t.size(nd - 2), cols = t.size(nd - 1);
    DG_CHECK(*this, cols <= 1 || t.stride(nd - 1) == 1, name,
             " must be contiguous in its last dimension (stride 1); got shape ", t.shape_string(), " with strides ",
             shape_str(t.strides()));
    if (rows > 1) {
      const int64_t ld = t.stride(nd - 2);
      DG_CHECK(*this, ld >= cols, name, "'s rows overlap: stride ", ld, " of dimension ", nd - 2, " is below its ",
               cols, " columns (strides ", shape_str(t.strides()), ")");
      DG_CHECK(*this, stride_aligned(ld, t.dtype()), name, "'s row stride (", ld, " elements of ", rt::name(t.dtype()),
               ") is not a multiple of 16 bytes, which TMA needs; shape ", t.shape_string(), ", strides ",
               shape_str(t.strides()), " (pad the rows)");
    }
    group_stride(t, name, true);
  }

  // K, the extent of every operand row along K, is whole 16-byte units whatever the storage: the GPU
  // path loads (and, for MN-major operands, copies) rows of K with TMA. The row strides alone do not
  // say so for padded rows or MN-major operands.
  void k_extent(int64_t k, const rt::Tensor& t, const char* name) const {
    DG_CHECK(*this, stride_aligned(k, t.dtype()), "K = ", k, " is not a whole number of 16-byte units of ", name,
             "'s ", rt::name(t.dtype()), " elements (K % 16 == 0 for float8, % 8 for bfloat16, % 32 for float4)");
  }

  // A scale tensor, logical view v ([rows, cols] = [operand rows / gran_r, K / gran_c]): either K-major
  // (stride 1 along cols) or MN-major. Per-row scales (gran_r == 1: A's, FP4 B's, the K-grouped
  // GEMM's) are what the GPU kernels load with TMA, in the MN-major layout: that form needs a 16-byte
  // aligned leading stride (get_mn_major_tma_aligned_tensor's layout); the K-major form is
  // transposed by the GPU path itself. Block scales (gran_r == 128) are small and read directly.
  void scales(const ScaleArg& v, const char* name) const {
    const rt::Tensor& t = v.tensor;
    no_negative_strides(t, name);
    aligned(t, name);
    const bool k_major = (v.cols <= 1 || v.s_c == 1) && (v.rows <= 1 || v.s_r >= v.cols);
    const bool mn_major = (v.rows <= 1 || v.s_r == 1) && (v.cols <= 1 || v.s_c >= v.rows);
    DG_CHECK(*this, k_major || mn_major, name,
             " must be stored K-major (stride 1 along K) or MN-major (stride 1 along M/N, ",
             "get_mn_major_tma_aligned_tensor()); got shape ", t.shape_string(), " with strides ",
             shape_str(t.strides()));
    const bool tma = !k_major && v.gran_r == 1;
    if (tma) {
      DG_CHECK(*this, v.cols <= 1 || stride_aligned(v.s_c, t.dtype()), name, " is MN-major with a leading stride of ",
               v.s_c,
               " elements, not a multiple of 16 bytes (TMA); use get_mn_major_tma_aligned_tensor() or the K-major "
               "form (shape ",
               t.shape_string(), ", strides ", shape_str(t.strides()), ")");
    }
    group_stride(t, name, tma);
  }

  const std::string& function() const { return fn_; }

 private:
  std::string fn_;
};

// The logical [rows, cols] view of the last two dimensions of t, transposed when the tensor is given
// MN-major ([K, MN]).
template <class Arg>
Arg view(const rt::Tensor& t, bool transposed) {
  Arg v;
  v.tensor = t;
  const int64_t nd = t.dim();
  v.rows = t.size(nd - 2);
  v.cols = t.size(nd - 1);
  v.s_r = t.stride(nd - 2);
  v.s_c = t.stride(nd - 1);
  if (transposed) {
    std::swap(v.rows, v.cols);
    std::swap(v.s_r, v.s_c);
  }
  v.s_g = nd == 3 ? t.stride(0) : 0;
  return v;
}

bool overlaps(const rt::Tensor& x, const rt::Tensor& y) {
  uintptr_t xl, xh, yl, yh;
  byte_range(x, &xl, &xh);
  byte_range(y, &yl, &yh);
  return xl < yh && yl < xh;
}

// d must not overlap an input; c may be d itself (same memory, same layout), nothing else.
void check_output_overlaps(const Checker& ck, const Problem& p) {
  const rt::Tensor& d = p.d.tensor;
  const std::pair<const rt::Tensor*, const char*> inputs[] = {
      {&p.a.tensor, "a"},           {&p.b.tensor, "b"},        {&p.sfa.tensor, "a_scales"},
      {&p.sfb.tensor, "b_scales"}, {&p.m_indices, "m_indices"}, {&p.masked_m, "masked_m"}};
  for (const auto& [t, name] : inputs)
    if (t->defined())
      DG_CHECK(ck, !overlaps(d, *t), "d overlaps ", name, " in memory; the output must not alias an input");
  if (p.c.present()) {
    const rt::Tensor& c = p.c.tensor;
    if (c.data() == d.data())
      DG_CHECK(ck, c.strides() == d.strides(), "c and d share memory with different strides (", shape_str(c.strides()),
               " vs ", shape_str(d.strides()), "); c may be d itself, nothing else");
    else
      DG_CHECK(ck, !overlaps(d, c), "d overlaps c in memory without being c; c may be d itself, nothing else");
  }
}

// Which K granularity an FP4 B's scales use, from their last dimension: ceil(K/32) or ceil(K/128).
int fp4_scale_granularity(const Checker& ck, const rt::Tensor& sfb, int64_t k, const std::string& doc) {
  const int64_t last = sfb.size(-1);
  if (last == ceil_div(k, 32) && k > 0) return 32;
  if (last == ceil_div(k, kBlockK)) return 128;
  ck.fail("b_scales must have shape ", doc, " with ceil(K/32) = ", ceil_div(k, 32), " or ceil(K/128) = ",
          ceil_div(k, kBlockK), " in the last dimension (per-32 or per-128 scales along K); got ", sfb.shape_string());
}

// The contents of m_indices (CPU only): every index in [-1, G), and each 128-row block holds rows of
// at most one group, then padding.
void check_m_indices(const Checker& ck, const rt::Tensor& m_indices, int64_t num_groups) {
  const int32_t* idx = static_cast<const int32_t*>(m_indices.data());
  const int64_t m = m_indices.size(0);
  for (int64_t r = 0; r < m; ++r)
    DG_CHECK(ck, idx[r] >= -1 && idx[r] < num_groups, "m_indices[", r, "] = ", idx[r], " is out of range for ",
             num_groups, " groups (valid: 0..", num_groups - 1, ", or -1 for a padding row)");
  for (int64_t b0 = 0; b0 < m; b0 += kBlockK) {
    const int64_t b1 = std::min(m, b0 + kBlockK);
    int32_t group = -1;
    bool padding_seen = false;
    for (int64_t r = b0; r < b1; ++r) {
      if (idx[r] < 0) {
        padding_seen = true;
        continue;
      }
      if (group < 0) group = idx[r];
      DG_CHECK(ck, idx[r] == group, "m_indices: rows ", b0, "..", b1 - 1, " (one 128-row block) hold rows of groups ",
               group, " and ", idx[r], "; each group's segment must start at a multiple of 128 rows ",
               "(get_mk_alignment_for_contiguous_layout())");
      DG_CHECK(ck, !padding_seen, "m_indices[", r, "] = ", idx[r],
               " follows a padding row (-1) in the same 128-row block (rows ", b0, "..", b1 - 1,
               "); padding rows must come at the end of a group's segment");
    }
  }
}

Problem base(const std::string& function, Kind kind, Grouping grouping, const rt::Tensor& a) {
  Problem p;
  p.function = function;
  p.kind = kind;
  p.grouping = grouping;
  p.device = a.device();
  return p;
}

// Common checks of D (and C): dtype, shape, layout.
void check_output(const Checker& ck, Problem& p, const rt::Tensor& d, const rt::Tensor& c, const rt::Shape& shape,
                  const std::string& doc, bool f32_only) {
  if (f32_only)
    ck.dtype(d, "d", {rt::DType::F32});
  else
    ck.dtype(d, "d", {rt::DType::BF16, rt::DType::F32});
  ck.dims(d, "d", int64_t(shape.size()), doc);
  ck.shape(d, "d", shape, doc);
  ck.operand(d, "d");
  p.d = view<MatrixArg>(d, false);
  if (c.defined()) {
    ck.dtype(c, "c", {rt::DType::F32});
    DG_CHECK(ck, d.dtype() == rt::DType::F32, "with c (accumulation), d must be float32 (got ", rt::name(d.dtype()),
             ")");
    ck.dims(c, "c", int64_t(shape.size()), doc);
    ck.shape(c, "c", shape, doc);
    ck.operand(c, "c");
    p.c = view<MatrixArg>(c, false);
  }
}

const char* major_doc(Major m, bool is_a) {
  if (is_a) return m == Major::K ? "[M, K]" : "[K, M]";
  return m == Major::K ? "[N, K]" : "[K, N]";
}

// A and B of a plain GEMM (2-D, either major), M, N, K from them, and the output d (and c) [M, N].
void bind_operands(const Checker& ck, Problem& p, const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c,
                   Major major_a, Major major_b) {
  ck.dims(a, "a", 2, major_doc(major_a, true));
  ck.dims(b, "b", 2, major_doc(major_b, false));
  p.a = view<MatrixArg>(a, major_a == Major::MN);
  p.b = view<MatrixArg>(b, major_b == Major::MN);
  p.m = p.a.rows;
  p.k = p.a.cols;
  p.n = p.b.rows;
  DG_CHECK(ck, p.b.cols == p.k, "b ", major_doc(major_b, false), " = ", b.shape_string(), " has K = ", p.b.cols,
           " but a ", major_doc(major_a, true), " = ", a.shape_string(), " has K = ", p.k);
  check_output(ck, p, d, c, {p.m, p.n}, "[M, N]", false);
}

}  // namespace

void byte_range(const rt::Tensor& t, uintptr_t* lo, uintptr_t* hi) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data());
  *lo = *hi = base;
  if (t.numel() == 0) return;
  int64_t last = 0;  // element offset of the last element
  for (int64_t i = 0; i < t.dim(); ++i) last += (t.size(i) - 1) * t.stride(i);
  *hi = base + uintptr_t(((last + 1) * rt::bits(t.dtype()) + 7) / 8);
}

Problem make_fp8_gemm(const std::string& function, bool fp4, const rt::Tensor& a, const rt::Tensor& sfa,
                      const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d, const rt::Tensor& c,
                      Major major_a, Major major_b) {
  const Checker ck(function);
  ck.on_one_device({{&a, "a"}, {&sfa, "a_scales"}, {&b, "b"}, {&sfb, "b_scales"}, {&d, "d"}, {c.defined() ? &c : nullptr, "c"}});
  Problem p = base(function, fp4 ? Kind::Fp8Fp4 : Kind::Fp8, Grouping::None, a);

  ck.dtype(a, "a", {rt::DType::F8E4M3});
  if (fp4)
    ck.dtype(b, "b", {rt::DType::F4E2M1});
  else
    ck.dtype(b, "b", {rt::DType::F8E4M3});
  ck.dtype(sfa, "a_scales", {rt::DType::F32, rt::DType::UE8M0});
  ck.dtype(sfb, "b_scales", {rt::DType::F32, rt::DType::UE8M0});
  bind_operands(ck, p, a, b, d, c, major_a, major_b);
  ck.operand(a, "a");
  ck.operand(b, "b");
  ck.k_extent(p.k, a, "a");
  ck.k_extent(p.k, b, "b");

  // Scales.
  const int64_t kb = ceil_div(p.k, kBlockK);  // a partial last block of K has its own scales
  ck.dims(sfa, "a_scales", 2, major_a == Major::K ? "[M, ceil(K/128)]" : "[ceil(K/128), M]");
  if (major_a == Major::K)
    ck.shape(sfa, "a_scales", {p.m, kb}, "[M, ceil(K/128)]");
  else
    ck.shape(sfa, "a_scales", {kb, p.m}, "[ceil(K/128), M]");
  p.sfa = view<ScaleArg>(sfa, major_a == Major::MN);
  p.sfa.gran_r = 1;
  p.sfa.gran_c = kBlockK;
  ck.scales(p.sfa, "a_scales");

  if (fp4) {
    ck.dims(sfb, "b_scales", 2, "[N, ceil(K/32)] or [N, ceil(K/128)]");
    const int gran = fp4_scale_granularity(ck, sfb, p.k, "[N, ceil(K/32)] or [N, ceil(K/128)]");
    ck.shape(sfb, "b_scales", {p.n, ceil_div(p.k, gran)}, gran == 32 ? "[N, ceil(K/32)]" : "[N, ceil(K/128)]");
    p.sfb = view<ScaleArg>(sfb, false);
    p.sfb.gran_r = 1;
    p.sfb.gran_c = gran;
  } else {
    const int64_t nb = ceil_div(p.n, kBlockK);
    ck.dims(sfb, "b_scales", 2, major_b == Major::K ? "[ceil(N/128), ceil(K/128)]" : "[ceil(K/128), ceil(N/128)]");
    if (major_b == Major::K)
      ck.shape(sfb, "b_scales", {nb, kb}, "[ceil(N/128), ceil(K/128)]");
    else
      ck.shape(sfb, "b_scales", {kb, nb}, "[ceil(K/128), ceil(N/128)]");
    p.sfb = view<ScaleArg>(sfb, major_b == Major::MN);
    p.sfb.gran_r = kBlockK;
    p.sfb.gran_c = kBlockK;
  }
  ck.scales(p.sfb, "b_scales");
  check_output_overlaps(ck, p);
  return p;
}

Problem make_bf16_gemm(const std::string& function, const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                       const rt::Tensor& c, Major major_a, Major major_b) {
  const Checker ck(function);
  ck.on_one_device({{&a, "a"}, {&b, "b"}, {&d, "d"}, {c.defined() ? &c : nullptr, "c"}});
  Problem p = base(function, Kind::Bf16, Grouping::None, a);
  ck.dtype(a, "a", {rt::DType::BF16});
  ck.dtype(b, "b", {rt::DType::BF16});
  bind_operands(ck, p, a, b, d, c, major_a, major_b);
  ck.operand(a, "a");
  ck.operand(b, "b");
  ck.k_extent(p.k, a, "a");
  ck.k_extent(p.k, b, "b");
  check_output_overlaps(ck, p);
  return p;
}

namespace {

// The scales of an M-grouped GEMM's B: [G, ceil(N/128), ceil(K/128)] (FP8) or [G, N, ceil(K/32|128)] (FP4).
void grouped_b_scales(const Checker& ck, Problem& p, const rt::Tensor& sfb) {
  const int64_t g = p.num_groups;
  if (p.kind == Kind::Fp8Fp4) {
    const std::string doc = "[G, N, ceil(K/32)] or [G, N, ceil(K/128)]";
    ck.dims(sfb, "b_scales", 3, doc);
    const int gran = fp4_scale_granularity(ck, sfb, p.k, doc);
    ck.shape(sfb, "b_scales", {g, p.n, ceil_div(p.k, gran)}, gran == 32 ? "[G, N, ceil(K/32)]" : "[G, N, ceil(K/128)]");
    p.sfb = view<ScaleArg>(sfb, false);
    p.sfb.gran_r = 1;
    p.sfb.gran_c = gran;
  } else {
    const std::string doc = "[G, ceil(N/128), ceil(K/128)]";
    ck.dims(sfb, "b_scales", 3, doc);
    ck.shape(sfb, "b_scales", {g, ceil_div(p.n, kBlockK), ceil_div(p.k, kBlockK)}, doc);
    p.sfb = view<ScaleArg>(sfb, false);
    p.sfb.gran_r = kBlockK;
    p.sfb.gran_c = kBlockK;
  }
  ck.scales(p.sfb, "b_scales");
}

// Devices and dtypes shared by the M-grouped GEMMs.
void m_grouped_common(const Checker& ck, Kind kind, const rt::Tensor& a, const rt::Tensor& sfa, const rt::Tensor& b,
                      const rt::Tensor& sfb, const rt::Tensor& d, const rt::Tensor& index, const char* index_name) {
  const bool scaled = kind != Kind::Bf16;
  ck.on_one_device({{&a, "a"}, {scaled ? &sfa : nullptr, "a_scales"}, {&b, "b"}, {scaled ? &sfb : nullptr, "b_scales"}, {&d, "d"}, {&index, index_name}});
  if (scaled) {
    ck.dtype(a, "a", {rt::DType::F8E4M3});
    if (kind == Kind::Fp8Fp4)
      ck.dtype(b, "b", {rt::DType::F4E2M1});
    else
      ck.dtype(b, "b", {rt::DType::F8E4M3});
    ck.dtype(sfa, "a_scales", {rt::DType::F32, rt::DType::UE8M0});
    ck.dtype(sfb, "b_scales", {rt::DType::F32, rt::DType::UE8M0});
  } else {
    ck.dtype(a, "a", {rt::DType::BF16});
    ck.dtype(b, "b", {rt::DType::BF16});
  }
  ck.dtype(index, index_name, {rt::DType::I32});
}

}  // namespace

Problem make_m_grouped_contiguous(const std::string& function, Kind kind, const rt::Tensor& a, const rt::Tensor& sfa,
                                  const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d,
                                  const rt::Tensor& m_indices) {
  const Checker ck(function);
  m_grouped_common(ck, kind, a, sfa, b, sfb, d, m_indices, "m_indices");
  Problem p = base(function, kind, Grouping::MContiguous, a);
  ck.dims(a, "a", 2, "[M, K]");
  ck.dims(b, "b", 3, "[G, N, K]");
  p.a = view<MatrixArg>(a, false);
  p.b = view<MatrixArg>(b, false);
  p.m = p.a.rows;
  p.k = p.a.cols;
  p.n = p.b.rows;
  p.num_groups = b.size(0);
  DG_CHECK(ck, p.num_groups >= 1, "b [G, N, K] = ", b.shape_string(), " has no groups");
  DG_CHECK(ck, p.b.cols == p.k, "b [G, N, K] = ", b.shape_string(), " has K = ", p.b.cols,
           " but a [M, K] = ", a.shape_string(), " has K = ", p.k);
  check_output(ck, p, d, {}, {p.m, p.n}, "[M, N]", false);
  ck.dims(m_indices, "m_indices", 1, "[M]");
  ck.shape(m_indices, "m_indices", {p.m}, "[M]");
  DG_CHECK(ck, p.m <= 1 || m_indices.stride(0) == 1, "m_indices must be contiguous (stride ", m_indices.stride(0), ")");
  ck.operand(a, "a");
  ck.operand(b, "b");
  ck.k_extent(p.k, a, "a");
  ck.k_extent(p.k, b, "b");
  if (kind != Kind::Bf16) {
    ck.dims(sfa, "a_scales", 2, "[M, ceil(K/128)]");
    ck.shape(sfa, "a_scales", {p.m, ceil_div(p.k, kBlockK)}, "[M, ceil(K/128)]");
    p.sfa = view<ScaleArg>(sfa, false);
    p.sfa.gran_r = 1;
    p.sfa.gran_c = kBlockK;
    ck.scales(p.sfa, "a_scales");
    grouped_b_scales(ck, p, sfb);
  }
  p.m_indices = m_indices;
  check_output_overlaps(ck, p);
  if (m_indices.device().is_cpu()) check_m_indices(ck, m_indices, p.num_groups);
  return p;
}

Problem make_m_grouped_masked(const std::string& function, Kind kind, const rt::Tensor& a, const rt::Tensor& sfa,
                              const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d,
                              const rt::Tensor& masked_m, int64_t expected_m) {
  const Checker ck(function);
  m_grouped_common(ck, kind, a, sfa, b, sfb, d, masked_m, "masked_m");
  Problem p = base(function, kind, Grouping::MMasked, a);
  ck.dims(a, "a", 3, "[G, max_M, K]");
  ck.dims(b, "b", 3, "[G, N, K]");
  p.a = view<MatrixArg>(a, false);
  p.b = view<MatrixArg>(b, false);
  p.num_groups = a.size(0);
  p.m = p.a.rows;
  p.k = p.a.cols;
  p.n = p.b.rows;
  DG_CHECK(ck, p.num_groups >= 1, "a [G, max_M, K] = ", a.shape_string(), " has no groups");
  DG_CHECK(ck, b.size(0) == p.num_groups, "b [G, N, K] = ", b.shape_string(), " has ", b.size(0),
           " groups but a [G, max_M, K] = ", a.shape_string(), " has ", p.num_groups);
  DG_CHECK(ck, p.b.cols == p.k, "b [G, N, K] = ", b.shape_string(), " has K = ", p.b.cols,
           " but a [G, max_M, K] = ", a.shape_string(), " has K = ", p.k);
  check_output(ck, p, d, {}, {p.num_groups, p.m, p.n}, "[G, max_M, N]", false);
  ck.dims(masked_m, "masked_m", 1, "[G]");
  ck.shape(masked_m, "masked_m", {p.num_groups}, "[G]");
  DG_CHECK(ck, p.num_groups <= 1 || masked_m.stride(0) == 1, "masked_m must be contiguous (stride ", masked_m.stride(0),
           ")");
  DG_CHECK(ck, expected_m > 0, "expected_m = ", expected_m,
           " must be positive (the typical number of valid rows per group)");
  ck.operand(a, "a");
  ck.operand(b, "b");
  ck.k_extent(p.k, a, "a");
  ck.k_extent(p.k, b, "b");
  if (kind != Kind::Bf16) {
    ck.dims(sfa, "a_scales", 3, "[G, max_M, ceil(K/128)]");
    ck.shape(sfa, "a_scales", {p.num_groups, p.m, ceil_div(p.k, kBlockK)}, "[G, max_M, ceil(K/128)]");
    p.sfa = view<ScaleArg>(sfa, false);
    p.sfa.gran_r = 1;
    p.sfa.gran_c = kBlockK;
    ck.scales(p.sfa, "a_scales");
    grouped_b_scales(ck, p, sfb);
  }
  p.masked_m = masked_m;
  p.expected_m = expected_m;
  check_output_overlaps(ck, p);
  if (masked_m.device().is_cpu()) {
    const int32_t* mm = static_cast<const int32_t*>(masked_m.data());
    for (int64_t g = 0; g < p.num_groups; ++g)
      DG_CHECK(ck, mm[g] >= 0 && mm[g] <= p.m, "masked_m[", g, "] = ", mm[g], " is out of range [0, max_M = ", p.m,
               "]");
  }
  return p;
}

Problem make_k_grouped(const std::string& function, const rt::Tensor& a, const rt::Tensor& sfa, const rt::Tensor& b,
                       const rt::Tensor& sfb, const rt::Tensor& d, const std::vector<int64_t>& ks,
                       const rt::Tensor& c) {
  const Checker ck(function);
  ck.on_one_device({{&a, "a"}, {&sfa, "a_scales"}, {&b, "b"}, {&sfb, "b_scales"}, {&d, "d"}, {c.defined() ? &c : nullptr, "c"}});
  Problem p = base(function, Kind::Fp8, Grouping::KContiguous, a);
  ck.dtype(a, "a", {rt::DType::F8E4M3});
  ck.dtype(b, "b", {rt::DType::F8E4M3});
  ck.dtype(sfa, "a_scales", {rt::DType::F32, rt::DType::UE8M0});
  ck.dtype(sfb, "b_scales", {rt::DType::F32, rt::DType::UE8M0});
  DG_CHECK(ck, !ks.empty(), "ks is empty (one K per group, at least one group)");
  p.num_groups = int64_t(ks.size());
  ck.dims(a, "a", 2, "[sum(ks), M]");
  ck.dims(b, "b", 2, "[sum(ks), N]");
  p.a = view<MatrixArg>(a, true);
  p.b = view<MatrixArg>(b, true);
  p.m = p.a.rows;
  p.n = p.b.rows;
  p.k = p.a.cols;
  int64_t sum = 0;
  for (size_t g = 0; g < ks.size(); ++g) {
    DG_CHECK(ck, ks[g] >= 0 && ks[g] % kBlockK == 0, "ks[", g, "] = ", ks[g],
             " must be a non-negative multiple of 128 (the scale block along K)");
    // Against the rows left rather than summed first: huge ks could wrap the sum around to a's rows.
    DG_CHECK(ck, ks[g] <= p.k - sum, "ks[", g, "] = ", ks[g], " takes sum(ks) past the ", p.k,
             " rows of a [sum(ks), M] = ", a.shape_string());
    sum += ks[g];
  }
  DG_CHECK(ck, p.k == sum, "a [sum(ks), M] = ", a.shape_string(), " has ", p.k, " rows but sum(ks) = ", sum);
  DG_CHECK(ck, p.b.cols == sum, "b [sum(ks), N] = ", b.shape_string(), " has ", p.b.cols, " rows but sum(ks) = ", sum);
  check_output(ck, p, d, c, {p.num_groups, p.m, p.n}, "[G, M, N]", true);
  ck.operand(a, "a");
  ck.operand(b, "b");
  ck.dims(sfa, "a_scales", 2, "[sum(ks)/128, M]");
  ck.shape(sfa, "a_scales", {sum / kBlockK, p.m}, "[sum(ks)/128, M]");
  ck.dims(sfb, "b_scales", 2, "[sum(ks)/128, N]");
  ck.shape(sfb, "b_scales", {sum / kBlockK, p.n}, "[sum(ks)/128, N]");
  p.sfa = view<ScaleArg>(sfa, true);
  p.sfa.gran_r = 1;
  p.sfa.gran_c = kBlockK;
  p.sfb = view<ScaleArg>(sfb, true);
  p.sfb.gran_r = 1;
  p.sfb.gran_c = kBlockK;
  ck.scales(p.sfa, "a_scales");
  ck.scales(p.sfb, "b_scales");
  p.ks = ks;
  check_output_overlaps(ck, p);
  return p;
}

}  // namespace deepgemm::detail
