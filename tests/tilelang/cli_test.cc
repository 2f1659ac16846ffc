// `tl run` end to end through the real binary: a kernel that updates an input in place (T.atomic_add
// into S) writes the update back to the file given by --inout, and leaves an --in file alone.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "rt/npy.h"
#include "testutil/tensors.h"

namespace {

TEST(TlRun, InoutWritesTheUpdatedInputBack) {
  const int64_t m = 100, n = 70;
  tltest::cli::TempDir tmp;
  const std::string x_path = tmp.path() + "/x.npy", s_path = tmp.path() + "/s.npy", s_in_path = tmp.path() + "/s_in.npy";
  rt::Tensor x = testutil::random_tensor({m, n}, rt::DType::F32, testutil::fresh_seed());
  rt::Tensor s = testutil::random_tensor({n}, rt::DType::F32, testutil::fresh_seed());
  rt::write_npy(x_path, x);
  rt::write_npy(s_path, s);
  rt::write_npy(s_in_path, s);
  std::vector<double> ref = testutil::to_f64(s), xv = testutil::to_f64(x);
  for (int64_t i = 0; i < m * n; ++i) ref[i % n] += xv[i];

  const std::vector<std::string> args = {"run", "tests/tilelang/programs/column_sum_atomic.py", "--param", "M=100", "--param", "N=70",
                                         "--in", x_path, "--inout", s_path};
  tltest::cli::Result r = tltest::cli::run_tl(args);
  ASSERT_EQ(r.exit_code, 0) << tltest::cli::describe(args) << "\n" << r.err;
  EXPECT_NE(r.out.find("input 2: float32 [70] updated -> " + s_path), std::string::npos) << r.out;
  EXPECT_LT(testutil::rel_error(testutil::to_f64(rt::read_npy(s_path)), ref), 1e-6);

  // With --in the same kernel runs on a copy: the file keeps its values.
  const std::vector<std::string> plain = {"run", "tests/tilelang/programs/column_sum_atomic.py", "--param", "M=100", "--param", "N=70",
                                          "--in", x_path, "--in", s_in_path};
  r = tltest::cli::run_tl(plain);
  ASSERT_EQ(r.exit_code, 0) << tltest::cli::describe(plain) << "\n" << r.err;
  EXPECT_EQ(testutil::to_f64(rt::read_npy(s_in_path)), testutil::to_f64(s));
}

// Found by fuzzing: --inout and --out of one file (or two --out) wrote both, and the second silently
// replaced the first. A device takes any number of outputs.
TEST(TlRun, ResultsWrittenToOneFileAreAnError) {
  tltest::cli::TempDir tmp;
  const std::string x_path = tmp.path() + "/x.npy", s_path = tmp.path() + "/s.npy";
  rt::write_npy(x_path, testutil::random_tensor({16, 32}, rt::DType::F32, testutil::fresh_seed()));
  rt::write_npy(s_path, testutil::random_tensor({32}, rt::DType::F32, testutil::fresh_seed()));
  const std::vector<std::string> args = {"run", "tests/tilelang/programs/column_sum_atomic.py", "--target", "cpu", "--param", "M=16",
                                         "--param", "N=32", "--in", x_path, "--inout", s_path, "--out", tmp.path() + "/./s.npy"};
  tltest::cli::Result r = tltest::cli::run_tl(args);
  EXPECT_EQ(r.exit_code, 1) << tltest::cli::describe(args) << "\n" << r.err;
  EXPECT_NE(r.err.find("tl: error: --inout " + s_path + " and --out " + tmp.path() + "/./s.npy name the same file"), std::string::npos) << r.err;

  const std::vector<std::string> to_null = {"run", "examples/matmul.py", "--target", "cpu", "--in", s_path, "--in", s_path,
                                            "--out", "/dev/null", "--out", "/dev/null"};
  r = tltest::cli::run_tl(to_null);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.find("name the same file"), std::string::npos) << r.err;
}

// Found by fuzzing: an --out file in a missing directory failed only when written, after the kernel
// had run and updated the --inout file. Now nothing runs.
TEST(TlRun, MissingResultDirectoryIsAnErrorBeforeTheRun) {
  tltest::cli::TempDir tmp;
  const std::string prog = tmp.path() + "/add.py", x_path = tmp.path() + "/x.npy", s_path = tmp.path() + "/s.npy";
  ASSERT_TRUE(tltest::cli::write_text(prog, R"(import tilelang.language as T

@T.prim_func
def main(X: T.Tensor((4,), "float32"), S: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=4) as bx:
        for i in T.Parallel(4):
            T.atomic_add(S[i], X[i])
            Y[i] = X[i]
)"));
  rt::write_npy(x_path, testutil::random_tensor({4}, rt::DType::F32, testutil::fresh_seed()));
  const rt::Tensor s = testutil::random_tensor({4}, rt::DType::F32, testutil::fresh_seed());
  rt::write_npy(s_path, s);
  for (const std::string& dir : {tmp.path() + "/missing", x_path}) {  // no directory; a file, not a directory
    const std::string out = dir + "/y.npy";
    const std::vector<std::string> args = {"run", prog, "--target", "cpu", "--in", x_path, "--inout", s_path, "--out", out};
    tltest::cli::Result r = tltest::cli::run_tl(args);
    EXPECT_EQ(r.exit_code, 1) << tltest::cli::describe(args) << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(out + ": error: cannot write the --out file: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(dir == x_path ? "is not a directory" : "there is no directory"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(testutil::to_f64(rt::read_npy(s_path)), testutil::to_f64(s));  // the kernel did not run
  }
}

// Found by fuzzing: `tl compile --help` was "unknown option --help" (exit 1).
TEST(TlHelp, AfterACommand) {
  for (const char* flag : {"--help", "-h"}) {
    const std::vector<std::string> args = {"compile", flag};
    tltest::cli::Result r = tltest::cli::run_tl(args);
    EXPECT_EQ(r.exit_code, 0) << tltest::cli::describe(args) << "\n" << r.err;
    EXPECT_EQ(r.out.rfind("usage: tl run FILE", 0), 0u) << r.out;
    EXPECT_EQ(r.err, "");
  }
}

// Found by fuzzing: without --kernel, a tune whose candidates all fail named the kernel ''.
TEST(TlTune, FailuresNameTheOnlyKernel) {
  const std::vector<std::string> args = {"tune", "examples/gemm.py", "--target", "cpu", "--param", "M=64", "--param", "N=64", "--param", "K=64",
                                         "--shape", "64x64:float16", "--shape", "64x64:float16", "--space", "block_M=abc"};
  tltest::cli::Result r = tltest::cli::run_tl(args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "tl: error: autotune of 'matmul': every one of the 1 candidates failed:") << r.err;
  EXPECT_NE(r.err.find("error: the divisor of T.ceildiv must be a number, not str ('abc')"), std::string::npos) << r.err;
}

}  // namespace
