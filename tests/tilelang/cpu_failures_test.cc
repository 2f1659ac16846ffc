// Run-time failures of kernels on the CPU reach the caller of the C++ API as user errors at the
// statement that failed, naming the kernel, instead of std::terminate: an allocation refused (a tile
// sized by the inputs) and a C++ exception thrown by user code, inside a kernel's blocks (an OpenMP
// region) or outside any region. (error/cases.txt checks the same through `tl run`.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "program_util.h"
#include "rt/error.h"

namespace {

tilelang::Kernel cpu_kernel(const tilelang::Module& m, const std::string& name, std::map<std::string, std::string> params = {}) {
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cpu();
  o.params = std::move(params);
  return m.kernel(name, o);
}

// The first line of the error the launch throws ("" and a test failure if it runs).
std::string launch_error(const tilelang::Kernel& k, const std::vector<rt::Tensor>& tensors) {
  try {
    k.launch(tensors);
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User) << e.what();
    const std::string what = e.what();
    return what.substr(0, what.find('\n'));
  }
  ADD_FAILURE() << "the kernel ran";
  return "";
}

TEST(CpuFailures, AllocationSizedByTheInputs) {
  const std::string file = "tests/tilelang/error/cpu_tile_too_large.py";
  tilelang::Kernel k = cpu_kernel(tilelang::Module::load(tltest::source_path(file)), "double");
  rt::Tensor x = tltest::random({8}, rt::DType::F32), y = rt::Tensor::empty({8}, rt::DType::F32);
  EXPECT_EQ(launch_error(k, {x, y}), tltest::source_path(file) + ":13:17: error: kernel 'double': allocating 32000000000000000 bytes for shared tile 'S' failed");
  // Half the elements: half the bytes, reported again (nothing of the first failure is left over).
  rt::Tensor x4 = tltest::random({4}, rt::DType::F32), y4 = rt::Tensor::empty({4}, rt::DType::F32);
  EXPECT_EQ(launch_error(k, {x4, y4}), tltest::source_path(file) + ":13:17: error: kernel 'double': allocating 16000000000000000 bytes for shared tile 'S' failed");
}

TEST(CpuFailures, SizePastInt64) {
  // The product of the extents overflowed int64 (undefined in C++): 2^61 x 8 wrapped to 0 and the
  // kernel ran on a one-element tile; 2^61 x 4 to INT64_MIN, refused as a negative count.
  const std::string file = tltest::source_path("tests/tilelang/error/tile_size_overflow.py");
  const tilelang::Module m = tilelang::Module::load(file);
  auto error = [&](int64_t n) {
    return rt::str(file, ":14:17: error: kernel 'double': allocating shared tile 'S' failed: 2305843009213693952 x ", n,
                   " elements is more than int64 holds");
  };
  rt::Tensor x8 = tltest::random({8}, rt::DType::F32), y8 = rt::Tensor::empty({8}, rt::DType::F32);
  rt::Tensor x4 = tltest::random({4}, rt::DType::F32), y4 = rt::Tensor::empty({4}, rt::DType::F32);
  EXPECT_EQ(launch_error(cpu_kernel(m, "double"), {x8, y8}), error(8));
  EXPECT_EQ(launch_error(cpu_kernel(m, "double"), {x4, y4}), error(4));
  // The product inside one extent, int32 arithmetic in the program (rows * N): exact, so past int64 too.
  EXPECT_EQ(launch_error(cpu_kernel(m, "double", {{"inner", "True"}}), {x8, y8}), error(8));
  // Within int64, the size is the allocation's to refuse, or to make.
  EXPECT_EQ(launch_error(cpu_kernel(m, "double", {{"rows", "1000000000000000"}}), {x4, y4}),
            file + ":14:17: error: kernel 'double': allocating 16000000000000000 bytes for shared tile 'S' failed");
  cpu_kernel(m, "double", {{"rows", "3"}}).launch({x8, y8});
  std::vector<double> twice = tltest::f64(x8);
  for (double& v : twice) v *= 2;
  tltest::expect_close(y8, twice, "y = 2x through a tile sized by the inputs");
}

TEST(CpuFailures, SizePastTheDimensionVariable) {
  // N is int32 in the kernel: 2^32 + 8 was cut to 8 and the kernel ran on 8 elements.
  const char* const source = R"(import tilelang.language as T


def double():
    N = T.symbolic("N")

    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    X[bx * 64 + i] = X[bx * 64 + i] * 2.0

    return main
)";
  tilelang::Kernel k = cpu_kernel(tilelang::Module::from_source(source, "wide.py"), "double");
  std::vector<float> data(8);  // all the kernel touched; the launch must not get that far
  rt::Tensor x = rt::Tensor::wrap(data.data(), {(int64_t(1) << 32) + 8}, rt::DType::F32, rt::Device::cpu());
  EXPECT_EQ(launch_error(k, {x}), "wide.py:8:14: error: tensor 1 of kernel 'double' (parameter 'X') has size 4294967304 in dimension 0, more than 'N' "
                                  "(int32) holds; declare it wider, e.g. T.symbolic(\"N\", \"int64\")");
}

const char* const kThrowing = R"(import tilelang.language as T


def in_block(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=1) as bx:
            X[bx] = 1.0
            if bx == 5:
                T.inline_code("throw std::runtime_error(\"block 5 failed\");")

    return main


def on_host(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        T.inline_code("throw std::runtime_error(\"host code failed\");")
        with T.Kernel(N, threads=1) as bx:
            X[bx] = 1.0

    return main
)";

TEST(CpuFailures, ExceptionInsideAKernelsBlocks) {
  tilelang::Kernel k = cpu_kernel(tilelang::Module::from_source(kThrowing, "throwing.py"), "in_block", {{"N", "64"}});
  EXPECT_EQ(launch_error(k, {tltest::random({64}, rt::DType::F32)}),
            "throwing.py:7:9: error: kernel 'in_block': a C++ exception was thrown: block 5 failed");
}

TEST(CpuFailures, ExceptionOutsideAnyRegion) {
  tilelang::Kernel k = cpu_kernel(tilelang::Module::from_source(kThrowing, "throwing.py"), "on_host", {{"N", "64"}});
  EXPECT_EQ(launch_error(k, {tltest::random({64}, rt::DType::F32)}),
            "throwing.py:16:5: error: kernel 'on_host': a C++ exception was thrown: host code failed");
}

}  // namespace
