#include "rt/npy.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "rt/file.h"
#include "test_util.h"

namespace {

using rt::Device;
using rt::DType;
using rt::ErrorKind;
using rt::Tensor;
using rt_test::expect_error;
using rt_test::TempDir;

// Fresh random bytes that are valid values of `dtype` (bool 0/1, F4 nibbles), never all zero.
void fill_random(Tensor& t, std::mt19937& rng) {
  auto* p = static_cast<uint8_t*>(t.data());
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(byte(rng));
  if (t.dtype() == DType::Bool)
    for (int64_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  if (t.numel() > 0) p[0] |= 1;
  // The unused high nibble of an odd-length F4 tensor is not data.
  if (t.dtype() == DType::F4E2M1 && t.numel() % 2 == 1) p[t.nbytes() - 1] &= 0x0F;
}

std::string bytes_of(const Tensor& t) { return std::string(static_cast<const char*>(t.data()), t.nbytes()); }

// A .npy file with the given header dict (padded as numpy does) and raw data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>(header.size() >> (8 * i));
  return out + header + data;
}

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<rt::Shape> shapes = {{}, {1}, {7}, {3, 5}, {2, 3, 5}, {4, 1, 3}, {0}, {2, 0, 3}, {1, 1, 1, 9}};
  for (DType dtype : {DType::F32, DType::F16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool,
                      DType::BF16, DType::F8E4M3, DType::F8E5M2, DType::UE8M0, DType::F4E2M1}) {
    for (const rt::Shape& shape : shapes) {
      Tensor t = Tensor::empty(shape, dtype);
      fill_random(t, rng);
      const std::string path = dir.file(std::string(rt::name(dtype)) + ".npy");
      rt::write_npy(path, t);
      Tensor back = rt::read_npy(path);
      SCOPED_TRACE(std::string(rt::name(dtype)) + " " + t.shape_string());
      EXPECT_EQ(back.dtype(), dtype);
      EXPECT_EQ(back.shape(), shape);
      EXPECT_TRUE(back.is_contiguous());
      EXPECT_EQ(bytes_of(back), bytes_of(t));
    }
  }
  // No temp files are left behind by the atomic writes.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 13);
}

TEST(Npy, WritesWhatNumpyWrites) {
  // np.save of np.arange(6, dtype='<f4').reshape(2, 3): a 128-byte preamble+header, then the data.
  TempDir dir;
  Tensor t = Tensor::empty({2, 3}, DType::F32);
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  rt::write_npy(dir.file("a.npy"), t);
  const std::string expected = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes_of(t));
  EXPECT_EQ(expected.size(), 128u + 24u);
  EXPECT_EQ(rt::read_file(dir.file("a.npy")).value(), expected);
  // 1-d shapes have the trailing comma, 0-d ones are ().
  rt::write_npy(dir.file("b.npy"), Tensor::empty({5}, DType::I64));
  EXPECT_NE(rt::read_file(dir.file("b.npy"))->find("'shape': (5,), }"), std::string::npos);
  rt::write_npy(dir.file("c.npy"), Tensor::empty({}, DType::U8));
  EXPECT_NE(rt::read_file(dir.file("c.npy"))->find("'descr': '|u1', 'fortran_order': False, 'shape': (), }"),
            std::string::npos);
  rt::write_npy(dir.file("d.npy"), Tensor::empty({2}, DType::BF16));
  EXPECT_NE(rt::read_file(dir.file("d.npy"))->find("'descr': 'bfloat16'"), std::string::npos);
}

TEST(Npy, WritesAStridedViewInLogicalOrder) {
  TempDir dir;
  std::vector<int32_t> buffer(12);
  for (int i = 0; i < 12; ++i) buffer[i] = 10 + i;
  // The transpose of a row-major [3, 4] matrix.
  Tensor view = Tensor::wrap(buffer.data(), {4, 3}, DType::I32, Device::cpu(), {1, 4});
  rt::write_npy(dir.file("t.npy"), view);
  Tensor back = rt::read_npy(dir.file("t.npy"));
  ASSERT_EQ(back.shape(), (rt::Shape{4, 3}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(back.data_as<int32_t>()[i * 3 + j], buffer[j * 4 + i]) << i << "," << j;

  // F4: every other column of a packed [2, 4] tensor; nibble 0 of byte 0 is element [0, 0].
  std::vector<uint8_t> packed = {0x21, 0x43, 0x65, 0x87};  // elements 1..8 in logical order
  Tensor f4 = Tensor::wrap(packed.data(), {2, 2}, DType::F4E2M1, Device::cpu(), {4, 2});
  rt::write_npy(dir.file("f4.npy"), f4);
  Tensor f4_back = rt::read_npy(dir.file("f4.npy"));
  ASSERT_EQ(f4_back.nbytes(), 2);
  EXPECT_EQ(f4_back.data_as<uint8_t>()[0], 0x31);  // elements 1, 3
  EXPECT_EQ(f4_back.data_as<uint8_t>()[1], 0x75);  // elements 5, 7
}

TEST(Npy, ReadsFortranOrderBigEndianAndOtherVersions) {
  TempDir dir;
  // A [2, 3] f4 array 0..5 in column-major order: 0 3 1 4 2 5.
  const float column_major[6] = {0, 3, 1, 4, 2, 5};
  write_bytes(dir.file("f.npy"), npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                          std::string(reinterpret_cast<const char*>(column_major), 24)));
  Tensor f = rt::read_npy(dir.file("f.npy"));
  ASSERT_EQ(f.shape(), (rt::Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f.data_as<float>()[i], float(i));

  // Big-endian int32 1, 2, 258 with the dict written with double quotes and a Python 2 long.
  const std::string be("\0\0\0\x01\0\0\0\x02\0\0\x01\x02", 12);
  write_bytes(dir.file("be.npy"), npy_file("{\"descr\": \">i4\", \"fortran_order\": False, \"shape\": (3L,)}", be));
  Tensor b = rt::read_npy(dir.file("be.npy"));
  ASSERT_EQ(b.dtype(), DType::I32);
  EXPECT_EQ(b.data_as<int32_t>()[0], 1);
  EXPECT_EQ(b.data_as<int32_t>()[1], 2);
  EXPECT_EQ(b.data_as<int32_t>()[2], 258);

  // Versions 2.0 and 3.0 (4-byte header length); a trailing comma in a 2-d shape; keys in any order.
  const std::string data = "\x01\x02\x03\x04\x05\x06";
  for (int major : {2, 3}) {
    write_bytes(dir.file("v.npy"), npy_file("{'shape': (2, 3,), 'fortran_order': False, 'descr': '|u1'}", data, major));
    Tensor v = rt::read_npy(dir.file("v.npy"));
    EXPECT_EQ(v.shape(), (rt::Shape{2, 3}));
    EXPECT_EQ(bytes_of(v), data);
  }
  // A 0-d array and the ml_dtypes float4 layout (one code a byte).
  write_bytes(dir.file("s.npy"),
              npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", std::string(8, '\0')));
  EXPECT_EQ(rt::read_npy(dir.file("s.npy")).numel(), 1);
  write_bytes(dir.file("f4.npy"),
              npy_file("{'descr': 'float4_e2m1fn', 'fortran_order': False, 'shape': (3,)}", "\x01\x0f\x07"));
  Tensor f4 = rt::read_npy(dir.file("f4.npy"));
  EXPECT_EQ(f4.dtype(), DType::F4E2M1);
  EXPECT_EQ(f4.data_as<uint8_t>()[0], 0xf1);
  EXPECT_EQ(f4.data_as<uint8_t>()[1] & 0x0f, 0x07);
}

// `--out /dev/null` once renamed a temp file over the device node, which replaced /dev/null when
// run as root. A FIFO stands in for the device here: it must stay a FIFO and receive the file.
TEST(Npy, WritesIntoAPipeInPlace) {
  TempDir dir;
  const std::string fifo = dir.file("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader opened first lets the writer's open succeed; the small file fits in the pipe's buffer.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  Tensor t = Tensor::empty({3}, DType::F32);
  for (int i = 0; i < 3; ++i) t.data_as<float>()[i] = float(i) + 0.5f;
  rt::write_npy(fifo, t);
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  std::string got(4096, '\0');
  const ssize_t n = ::read(reader, got.data(), got.size());
  ::close(reader);
  ASSERT_GT(n, 0);
  got.resize(static_cast<size_t>(n));
  write_bytes(dir.file("copy.npy"), got);
  EXPECT_EQ(bytes_of(rt::read_npy(dir.file("copy.npy"))), bytes_of(t));
}

TEST(Npy, ErrorsNameTheFileAndTheReason) {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  expect_error([&] { rt::read_npy(missing); }, ErrorKind::User, missing + ": error: cannot open", "No such file");

  const std::string bad_magic = dir.file("bad_magic.npy");
  write_bytes(bad_magic, "PK\x03\x04 this is a zip file, not a .npy file");
  expect_error([&] { rt::read_npy(bad_magic); }, ErrorKind::User, bad_magic + ": error: ", "bad magic");

  const std::string short_file = dir.file("short.npy");
  write_bytes(short_file, "\x93NUM");
  expect_error([&] { rt::read_npy(short_file); }, ErrorKind::User, short_file + ": error: truncated", "preamble");

  const std::string truncated = dir.file("truncated.npy");
  write_bytes(truncated, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", std::string(60, 'x')));
  expect_error([&] { rt::read_npy(truncated); }, ErrorKind::User, truncated + ": error: truncated", "64 data bytes",
               "holds 60");

  // Too large in any order, a 0 among the dimensions or not: the nonzero ones' bytes overflow int64.
  const std::string huge = dir.file("huge.npy");
  for (const char* shape : {"(0, 4611686018427387904, 4)", "(4611686018427387904, 4, 0)", "(3037000500, 3037000500)"}) {
    write_bytes(huge, npy_file(std::string("{'descr': '<f2', 'fortran_order': False, 'shape': ") + shape + ", }", ""));
    expect_error([&] { rt::read_npy(huge); }, ErrorKind::User, huge + ": error: the shape ", "is too large");
  }
  write_bytes(huge, npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 1152921504606846976), }", ""));
  EXPECT_EQ(rt::read_npy(huge).numel(), 0);

  const std::string cut_header = dir.file("cut_header.npy");
  write_bytes(cut_header, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "").substr(0, 30));
  expect_error([&] { rt::read_npy(cut_header); }, ErrorKind::User, cut_header + ": error: truncated", "header");

  const std::string complex = dir.file("complex.npy");
  write_bytes(complex, npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')));
  expect_error([&] { rt::read_npy(complex); }, ErrorKind::User, complex + ": error: unsupported element type '<c8'",
               "'<f4'", "'bfloat16'");

  const std::string void2 = dir.file("void.npy");
  write_bytes(void2, npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }", std::string(2, '\0')));
  expect_error([&] { rt::read_npy(void2); }, ErrorKind::User, void2 + ": error: untyped element type '<V2'",
               "ml_dtypes", ":bfloat16");
  // Told what the records hold, the same file reads as bfloat16 (0x3F80 is 1.0), but not as a 1-byte type.
  write_bytes(void2, npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", std::string("\x80\x3f\x00\xc0", 4)));
  Tensor bf = rt::read_npy(void2, DType::BF16);
  EXPECT_EQ(bf.dtype(), DType::BF16);
  EXPECT_EQ(bf.data_as<uint16_t>()[0], 0x3F80);
  EXPECT_EQ(bf.data_as<uint16_t>()[1], 0xC000);
  expect_error([&] { rt::read_npy(void2, DType::F8E4M3); }, ErrorKind::User, void2 + ": error: elements of '<V2' cannot hold float8_e4m3");

  const std::string structured = dir.file("structured.npy");
  write_bytes(structured, npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "xxxx"));
  expect_error([&] { rt::read_npy(structured); }, ErrorKind::User, structured + ": error: structured dtypes");

  const std::string malformed = dir.file("malformed.npy");
  write_bytes(malformed, npy_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "xxxx"));
  expect_error([&] { rt::read_npy(malformed); }, ErrorKind::User, malformed + ": error: malformed header",
               "expected True or False");

  const std::string no_shape = dir.file("no_shape.npy");
  write_bytes(no_shape, npy_file("{'descr': '<f4', 'fortran_order': False}", "xxxx"));
  expect_error([&] { rt::read_npy(no_shape); }, ErrorKind::User, no_shape + ": error: malformed header", "'shape'");

  const std::string version = dir.file("version.npy");
  std::string v9 = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "xxxx");
  v9[6] = 9;
  write_bytes(version, v9);
  expect_error([&] { rt::read_npy(version); }, ErrorKind::User,
               version + ": error: unsupported .npy format version 9.0");

  const std::string bad_f4 = dir.file("bad_f4.npy");
  write_bytes(bad_f4, npy_file("{'descr': 'float4_e2m1fn', 'fortran_order': False, 'shape': (2,)}", "\x01\x20"));
  expect_error([&] { rt::read_npy(bad_f4); }, ErrorKind::User, bad_f4 + ": error: element 1 is 32");

  expect_error([&] { rt::read_npy(dir.path()); }, ErrorKind::User, dir.path() + ": error: ", "directory");

  const std::string out = dir.file("no_such_dir/out.npy");
  expect_error([&] { rt::write_npy(out, Tensor::empty({2}, DType::F32)); }, ErrorKind::User, out + ": error: ");
  expect_error([&] { rt::write_npy(dir.file("gpu.npy"), Tensor::wrap(nullptr, {0}, DType::F32, Device::cuda(0))); },
               ErrorKind::User, "gpu.npy: error: write_npy needs a CPU tensor", "cuda:0");
  expect_error([&] { rt::write_npy(dir.file("undef.npy"), Tensor()); }, ErrorKind::User,
               "undef.npy: error: ", "undefined");
}

// Reads path with the process's address space capped at cap bytes; exits 0 when read_npy fails with
// an error that starts with the path, 1 when with another, 2 when it reads the file.
[[noreturn]] void read_with_address_space_cap(const std::string& path, rlim_t cap) {
  const rlimit limit{cap, cap};
  setrlimit(RLIMIT_AS, &limit);
  try {
    rt::read_npy(path);
  } catch (const rt::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(std::string(e.what()).rfind(path + ": error: ", 0) == 0 ? 0 : 1);
  }
  std::exit(2);
}

// Found by fuzzing `tl run`: a header promising more data than memory holds (a sparse file passes the
// size check) failed with Tensor::empty's out-of-memory message, which did not say which file. The
// child process caps its address space below the tensor, so the allocation fails on any host.
TEST(Npy, AllocationFailureNamesTheFile) {
  TempDir dir;
  const std::string sparse = dir.file("sparse.npy");
  const int64_t data_bytes = int64_t{1} << 32;  // float32 (2^30,)
  write_bytes(sparse, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }", ""));
  std::filesystem::resize_file(sparse, std::filesystem::file_size(sparse) + data_bytes);
  EXPECT_EXIT(read_with_address_space_cap(sparse, data_bytes / 2), testing::ExitedWithCode(0), "out of host memory");
}

}  // namespace
