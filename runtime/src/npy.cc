#include "rt/npy.h"

#include <algorithm>
#include <optional>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <vector>

#include "rt/error.h"
#include "rt/file.h"

namespace rt {
namespace {

static_assert(std::endian::native == std::endian::little, "npy byte order handling assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";

struct NpyType {
  DType dtype;
  const char* descr;  // as written; the byte-order character is checked separately for numeric descrs
  int itemsize;       // bytes of one element in the file
};

constexpr NpyType kTypes[] = {
    {DType::F16, "<f2", 2},
    {DType::F32, "<f4", 4},
    {DType::F64, "<f8", 8},
    {DType::I8, "|i1", 1},
    {DType::U8, "|u1", 1},
    {DType::I32, "<i4", 4},
    {DType::I64, "<i8", 8},
    {DType::Bool, "|b1", 1},
    {DType::BF16, "bfloat16", 2},
    {DType::F8E4M3, "float8_e4m3fn", 1},
    {DType::F8E5M2, "float8_e5m2", 1},
    {DType::UE8M0, "float8_e8m0fnu", 1},
    {DType::F4E2M1, "float4_e2m1fn", 1},
};

std::string supported_descrs() {
  std::string out;
  for (const NpyType& t : kTypes) out += str(out.empty() ? "" : ", ", "'", t.descr, "'");
  return out;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw_user_error(str(path, ": error: ", what));
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  // header := '{' (key ':' value ',')* [key ':' value] '}'
  Header parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!eat('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '[')
          fail(path_, "structured dtypes (a list 'descr') are not supported; supported descrs: " + supported_descrs());
        h.descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        seen_shape = true;
      } else {
        error("unexpected key '" + key + "'");
      }
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) error("text after the closing '}'");
    if (!seen_descr || !seen_order || !seen_shape) error("it needs the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& what) {
    fail(path_, str("malformed header: ", what, " at offset ", pos_, " of \"", text_, "\""));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(str("expected '", c, "'"));
  }
  // string := "'" chars "'" | '"' chars '"'   (no escapes: no valid key or descr needs one)
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) error("expected a string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  // bool := 'True' | 'False'
  bool parse_bool() {
    skip_space();
    for (const bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error("expected True or False");
  }
  // shape := '(' ')' | '(' int ',' ')' | '(' int (',' int)* [','] ')'   ; an int may end in 'L' (Python 2)
  Shape parse_shape() {
    Shape shape;
    expect('(');
    while (!eat(')')) {
      skip_space();
      const size_t start = pos_;
      int64_t d = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, text_[pos_] - '0', &d))
          error("dimension too large");
        ++pos_;
      }
      if (pos_ == start) error("expected a non-negative integer dimension");
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
      shape.push_back(d);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

struct Resolved {
  const NpyType* type;
  bool swap;  // big-endian in the file
};

Resolved resolve_descr(const std::string& descr, const std::string& path, std::optional<DType> untyped_as) {
  for (const NpyType& t : kTypes)
    if (descr == t.descr) return {&t, false};
  // Numeric descrs: byte order ('<' little, '>' big, '=' native, '|' not applicable), kind, size.
  if (descr.size() >= 3 && std::string_view("<>=|").find(descr[0]) != std::string_view::npos) {
    const std::string body = descr.substr(1);
    if (body[0] == 'V') {
      // np.save writes ml_dtypes arrays as untyped records: the caller says what they hold.
      if (untyped_as) {
        for (const NpyType& t : kTypes)
          if (t.dtype == *untyped_as && body == str("V", t.itemsize)) return {&t, false};
        fail(path, str("elements of '", descr, "' cannot hold ", name(*untyped_as), " (", body.substr(1), " bytes each)"));
      }
      fail(path, str("untyped element type '", descr,
                     "': np.save writes ml_dtypes arrays (bfloat16, float8, float4) this way and loses their type; "
                     "say which it is after the file name, e.g. --in ", path, ":bfloat16 (supported descrs: ", supported_descrs(), ")"));
    }
    for (const NpyType& t : kTypes) {
      if (t.descr[0] != '<' && t.descr[0] != '|') continue;  // named descrs have no byte order
      if (body == t.descr + 1) return {&t, descr[0] == '>' && t.itemsize > 1};
    }
  }
  fail(path, str("unsupported element type '", descr, "'; supported descrs: ", supported_descrs()));
}

// Calls f(i, offset) for each element in row-major logical order: i counts 0.., offset is in
// elements from the first one. Handles 0-d (one element) and empty tensors (none).
template <class F>
void for_each_element(const Shape& shape, const Shape& strides, F f) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return;
  Shape index(shape.size(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < numel; ++i) {
    f(i, offset);
    for (size_t k = shape.size(); k-- > 0;) {
      offset += strides[k];
      if (++index[k] < shape[k]) break;
      offset -= strides[k] * shape[k];
      index[k] = 0;
    }
  }
}

Shape fortran_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string shape_tuple(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

const NpyType& npy_type_of(DType dtype) {
  for (const NpyType& t : kTypes)
    if (t.dtype == dtype) return t;
  throw_user_error(str("write_npy: no .npy element type for ", name(dtype)));
}

}  // namespace

Tensor read_npy(const std::string& path, std::optional<DType> untyped_as) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, str("cannot open for reading: ", std::strerror(errno)));
  if (std::filesystem::is_directory(path)) fail(path, "cannot read: it is a directory");
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  in.seekg(0);
  auto read_exact = [&](char* dst, int64_t n, const char* what) {
    if (!in.read(dst, n)) fail(path, str("truncated: the file ends inside the ", what));
  };

  char preamble[8];
  read_exact(preamble, sizeof(preamble), "preamble");
  if (std::string_view(preamble, kMagic.size()) != kMagic) fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<uint8_t>(preamble[6]), minor = static_cast<uint8_t>(preamble[7]);
  if (major < 1 || major > 3) fail(path, str("unsupported .npy format version ", major, ".", minor));
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 (UTF-8 header) in 4; little-endian.
  unsigned char len_bytes[4] = {};
  const int len_size = major == 1 ? 2 : 4;
  read_exact(reinterpret_cast<char*>(len_bytes), len_size, "header length");
  int64_t header_len = 0;
  for (int i = len_size; i-- > 0;) header_len = header_len << 8 | len_bytes[i];
  const int64_t data_offset = 8 + len_size + header_len;
  if (data_offset > file_size) fail(path, str("truncated: the header of ", header_len, " bytes runs past the end"));
  std::string header_text(static_cast<size_t>(header_len), '\0');
  read_exact(header_text.data(), header_len, "header");

  const Header header = HeaderParser(header_text, path).parse();
  const auto [type, swap] = resolve_descr(header.descr, path, untyped_as);
  // As in NumPy, the nonzero dimensions' bytes must fit in int64 even when another dimension is 0:
  // else whether a shape is accepted would depend on where its 0 is, and its strides could overflow.
  int64_t nonzero_bytes = type->itemsize;
  for (int64_t d : header.shape)
    if (d != 0 && __builtin_mul_overflow(nonzero_bytes, d, &nonzero_bytes))
      fail(path, "the shape " + shape_tuple(header.shape) + " is too large");
  const bool empty = std::find(header.shape.begin(), header.shape.end(), 0) != header.shape.end();
  const int64_t data_bytes = empty ? 0 : nonzero_bytes;
  const int64_t numel = data_bytes / type->itemsize;
  if (file_size - data_offset < data_bytes)
    fail(path, str("truncated: the header promises ", data_bytes, " data bytes (", header.descr, " ",
                   shape_tuple(header.shape), ") but the file holds ", file_size - data_offset));

  // A header can promise more than memory holds (a sparse file): an allocation refused names the file.
  Tensor tensor;
  try {
    tensor = Tensor::empty(header.shape, type->dtype);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::User) throw;
    fail(path, e.what());
  }
  const bool direct = !swap && !header.fortran_order && type->dtype != DType::F4E2M1;
  if (direct) {
    read_exact(static_cast<char*>(tensor.data()), data_bytes, "data");
    return tensor;
  }
  std::vector<char> raw(static_cast<size_t>(data_bytes));
  read_exact(raw.data(), data_bytes, "data");
  const int size = type->itemsize;
  if (swap)
    for (int64_t i = 0; i < numel; ++i) std::reverse(raw.data() + i * size, raw.data() + (i + 1) * size);
  // The file's element order: row-major, or column-major for fortran_order.
  const Shape file_strides = header.fortran_order ? fortran_strides(header.shape) : contiguous_strides(header.shape);
  auto* dst = static_cast<unsigned char*>(tensor.data());
  if (type->dtype == DType::F4E2M1) {
    std::memset(dst, 0, static_cast<size_t>(tensor.nbytes()));
    for_each_element(header.shape, file_strides, [&](int64_t i, int64_t offset) {
      const auto v = static_cast<unsigned char>(raw[offset]);
      if (v > 0xF) fail(path, str("element ", i, " is ", int(v), ", not a float4_e2m1fn code (0..15)"));
      dst[i / 2] |= static_cast<unsigned char>(v << (4 * (i % 2)));  // low nibble first
    });
  } else {
    for_each_element(header.shape, file_strides,
                     [&](int64_t i, int64_t offset) { std::memcpy(dst + i * size, raw.data() + offset * size, size); });
  }
  return tensor;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  if (!tensor.defined()) fail(path, "write_npy of an undefined tensor");
  if (!tensor.device().is_cpu())
    fail(path, str("write_npy needs a CPU tensor; this one is on ", tensor.device().to_string()));
  const NpyType& type = npy_type_of(tensor.dtype());

  std::string header =
      str("{'descr': '", type.descr, "', 'fortran_order': False, 'shape': ", shape_tuple(tensor.shape()), ", }");
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends in a newline. Version
  // 1.0 has a 2-byte header length, 2.0 a 4-byte one.
  auto padding = [&](size_t preamble) { return 63 - (preamble + header.size()) % 64; };
  const bool v1 = header.size() + padding(10) + 1 <= std::numeric_limits<uint16_t>::max();
  const size_t preamble = v1 ? 10 : 12;
  header.append(padding(preamble), ' ');
  header += '\n';
  std::string head(kMagic);
  head += static_cast<char>(v1 ? 1 : 2);
  head += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) head += static_cast<char>(header.size() >> (8 * i));
  head += header;

  const auto* src = static_cast<const unsigned char*>(tensor.data());
  const int size = type.itemsize;
  if (tensor.dtype() != DType::F4E2M1 && tensor.is_contiguous()) {
    write_file_atomic(path, {head, std::string_view(reinterpret_cast<const char*>(src), tensor.nbytes())});
    return;
  }
  std::string data(static_cast<size_t>(tensor.numel() * size), '\0');
  if (tensor.dtype() == DType::F4E2M1) {
    // Offsets are in nibbles from the data pointer: byte offset >> 1, low nibble first.
    for_each_element(tensor.shape(), tensor.strides(), [&](int64_t i, int64_t offset) {
      data[i] = static_cast<char>((src[offset >> 1] >> (4 * (offset & 1))) & 0xF);
    });
  } else {
    for_each_element(tensor.shape(), tensor.strides(), [&](int64_t i, int64_t offset) {
      std::memcpy(data.data() + i * size, src + offset * size, size);
    });
  }
  write_file_atomic(path, {head, data});
}

}  // namespace rt
