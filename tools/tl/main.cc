// tl: the TileLang command line.
//   tl run FILE [--in X.npy]... [--out Y.npy]... [--param NAME=VALUE]... [--kernel NAME] [--target cpu|cuda] [--repeat N]
//   tl compile FILE --emit=ast|ir|lowered|cpp|cuda|ptx [--in X.npy | --shape 64x32[:float16]]... [--param ...] [--kernel NAME] [--target cpu|cuda[:ARCH]]
//   tl tune FILE --space NAME=V1,V2,... [--in X.npy | --shape 64x32[:float16]]... [--param ...] [--kernel NAME] [--target cpu|cuda]
//   tl demo
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>

#include "cli.h"
#include "rt/error.h"
#include "rt/npy.h"

namespace {

const char* kUsage =
    "usage: tl run FILE [--in X.npy | --inout X.npy]... [--out Y.npy]... [--param NAME=VALUE]... [--kernel NAME] [--target cpu|cuda] [--repeat N]\n"
    "       tl compile FILE --emit=ast|ir|lowered|cpp|cuda|ptx [--in X.npy | --shape 64x32[:float16]]... [--param NAME=VALUE]... [--kernel NAME] [--target cpu|cuda[:ARCH]]\n"
    "       tl tune FILE --space NAME=V1,V2,...  [--in X.npy | --shape 64x32[:float16]]... [--param NAME=VALUE]... [--kernel NAME] [--target cpu|cuda]\n"
    "       tl demo\n";

// A string of decimal digits as a number no larger than `max`; nullopt when it is larger.
std::optional<int64_t> parse_digits(const std::string& digits, int64_t max) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v > max) return std::nullopt;
  return v;
}

// "64x32", "Mx32:float16": sizes or symbolic names, then an optional dtype.
tilelang::frontend::TensorSpec parse_shape(const std::string& text) {
  tilelang::frontend::TensorSpec spec;
  std::string dims = text;
  if (size_t colon = text.find(':'); colon != std::string::npos) {
    dims = text.substr(0, colon);
    auto d = rt::parse_dtype(text.substr(colon + 1));
    RT_USER_CHECK(d, "--shape ", text, ": unknown dtype '", text.substr(colon + 1), "'");
    spec.dtype = *d;
  }
  size_t start = 0;
  while (start <= dims.size()) {
    size_t x = dims.find('x', start);
    std::string part = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
    RT_USER_CHECK(!part.empty(), "--shape ", text, ": expected sizes like 64x32 or Mx32");
    if (part.find_first_not_of("0123456789") == std::string::npos) {
      auto size = parse_digits(part, std::numeric_limits<int64_t>::max());
      RT_USER_CHECK(size, "--shape ", text, ": the size ", part, " is too large (at most ", std::numeric_limits<int64_t>::max(), ")");
      spec.shape.push_back(*size);
    } else {
      spec.shape.push_back(part);
    }
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return spec;
}

tl_cli::Options parse(int argc, char** argv, int first) {
  tl_cli::Options o;
  auto value = [&](int& i, const std::string& arg, const std::string& flag) -> std::string {
    if (arg.size() > flag.size() && arg[flag.size()] == '=') return arg.substr(flag.size() + 1);
    RT_USER_CHECK(i + 1 < argc, flag, " needs a value\n", kUsage);
    return argv[++i];
  };
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    auto is = [&](const char* flag) { return a == flag || a.rfind(std::string(flag) + "=", 0) == 0; };
    if (is("--in")) o.inputs.push_back(value(i, a, "--in"));
    else if (is("--inout")) o.inouts.push_back(o.inputs.size()), o.inputs.push_back(value(i, a, "--inout"));
    else if (is("--out")) o.outputs.push_back(value(i, a, "--out"));
    else if (is("--shape")) o.shapes.push_back(parse_shape(value(i, a, "--shape")));
    else if (is("--kernel")) o.kernel = value(i, a, "--kernel");
    else if (is("--target")) o.target = value(i, a, "--target");
    else if (is("--emit")) o.emit = value(i, a, "--emit");
    else if (is("--repeat")) {
      std::string v = value(i, a, "--repeat");
      RT_USER_CHECK(v.find_first_not_of("0123456789") == std::string::npos && !v.empty(), "--repeat needs a count, not '", v, "'");
      auto n = parse_digits(v, std::numeric_limits<int>::max());
      RT_USER_CHECK(n, "--repeat ", v, ": too many (at most ", std::numeric_limits<int>::max(), ")");
      o.repeat = static_cast<int>(*n);
    } else if (is("--param")) {
      std::string v = value(i, a, "--param");
      size_t eq = v.find('=');
      RT_USER_CHECK(eq != std::string::npos && eq > 0, "--param needs NAME=VALUE, not '", v, "'");
      const std::string name = v.substr(0, eq);
      RT_USER_CHECK(!o.params.count(name), "--param ", name, " is given twice (", o.params[name], " and ", v.substr(eq + 1), ")");
      o.params[name] = v.substr(eq + 1);
    } else if (is("--space")) {
      std::string v = value(i, a, "--space");
      size_t eq = v.find('=');
      RT_USER_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < v.size(), "--space needs NAME=V1,V2,..., not '", v, "'");
      std::vector<std::string> values;
      for (size_t at = eq + 1; at <= v.size();) {
        size_t comma = std::min(v.find(',', at), v.size());
        RT_USER_CHECK(comma > at, "--space ", v, ": an empty value");
        values.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
      o.space.emplace_back(v.substr(0, eq), std::move(values));
    } else if (a.rfind("--", 0) == 0) {
      rt::throw_user_error(rt::str("unknown option ", a, "\n", kUsage));
    } else {
      RT_USER_CHECK(o.file.empty(), "one source file at a time (got ", o.file, " and ", a, ")");
      o.file = a;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::cerr << kUsage;
      return 2;
    }
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
      std::cout << kUsage;
      return 0;
    }
    for (int i = 2; i < argc; ++i)  // `tl compile --help` too
      if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
        std::cout << kUsage;
        return 0;
      }
    tl_cli::Options o = parse(argc, argv, 2);
    if (cmd == "run") return tl_cli::run_command(o);
    if (cmd == "compile") return tl_cli::compile_command(o);
    if (cmd == "demo") return tl_cli::demo_command(o);
    if (cmd == "tune") return tl_cli::tune_command(o);
    std::cerr << "tl: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const rt::Error& e) {
    // Messages with a location read "file:line:col: error: ..."; the others get "tl: error: ".
    std::string msg = e.what();
    std::string first = msg.substr(0, msg.find('\n'));
    bool located = first.find(": error: ") != std::string::npos;
    std::cerr << (located ? "" : e.kind() == rt::ErrorKind::User ? "tl: error: " : "tl: ") << msg << "\n";
    return e.kind() == rt::ErrorKind::User ? 1 : 3;
  } catch (const std::exception& e) {
    std::cerr << "tl: internal error: " << e.what() << "\n";
    return 3;
  }
}
