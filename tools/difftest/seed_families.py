"""Random families of tools/difftest for the seed dialect (@tile_kernel: whole tensors, plain Python
loops), around the rewrites of docs/language.md 3.5: loop nests recognized as gemms (transposed,
batched, partial ranges, casts, and near misses that must stay loops: offsets, triangles, C aliased
with an operand, two statements, narrowing casts, bounds that read C), fused epilogues (and the
cases that must not fuse), reductions promoted to wider accumulators (and the bodies that must not
be), and loops the CPU schedule parallelizes or vectorizes (and dependences that look independent).

The reference is the program itself, run by a small emulator of the seed dialect (run_model): tensors
are float64 arrays that round to their dtype at every store, as unrecognized loops do. Where the
language says a rewrite happens, the program carries model-only lines, comments to tl (`#@ exact(c)`
... `#@ settle(c)`), that let c hold exact values over the nest and round them once at its end: a
recognized gemm (float32 accumulator) and a promoted reduction (a float32/float64 accumulator rounded
once). Inputs are chosen so that every sum of a nest is exact in float32 (small dyadic fractions), so
float32 accumulation is exact whatever its order, and the comparison is exact (tolerance 0): rounding
once where the program rounds every step, or every step where it rounds once, shows.
Each generator has the signature of families.py's (R, rs, name) -> Prog. A library module of
tools/difftest (difftest.py runs the tool)."""
import itertools
import re
import numpy as np
import npy_io
from families import Prog
from construct_families import INT_RANGE

SEED = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "float64": "FP64", "float8_e4m3": "FP8_E4M3",
        "int8": "INT8", "uint8": "UINT8", "int32": "INT32", "int64": "INT64"}
FLOATS = ("float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2")
EXACT = (0, 0)
HEADER = "import tilelang.language as T\n\n# %s\n"


# ---------------------------------------------------------------- the emulator (the model)
def convert(v, dt):
    """The value v (a Python int: an integer expression; a float: a float one) stored into dt."""
    if dt in FLOATS:
        v = float(v)
        if dt == "float64" or v != v:
            return v
        if dt == "float32":
            return float(np.float32(v))
        if dt == "float8_e4m3":
            v = max(-448.0, min(448.0, v))
        return float(npy_io.round_to(v, dt))
    lo, hi = INT_RANGE[dt]
    if isinstance(v, float):  # float to integer: truncates, saturates
        return int(max(lo, min(hi, np.trunc(v))))
    return (v - lo) % (hi - lo + 1) + lo  # integer to integer: wraps


class MTensor:
    """A tensor of the model: float64 (or int) values that round to dtype when stored, unless exact."""

    def __init__(self, values, dtype):
        self.v = np.array(values, dtype=np.float64 if dtype in FLOATS else object)
        self.dtype = dtype
        self.exact = False

    @property
    def shape(self):
        return self.v.shape

    @property
    def ndim(self):
        return self.v.ndim

    def _index(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.v.ndim:
            raise IndexError("rank")
        for i, n in zip(idx, self.v.shape):
            if not isinstance(i, int) or i < 0 or i >= n:
                raise IndexError("model: index %r out of %r" % (idx, self.v.shape))
        return idx

    def __getitem__(self, idx):
        x = self.v[self._index(idx)]
        return float(x) if self.dtype in FLOATS else int(x)

    def __setitem__(self, idx, value):
        self.v[self._index(idx)] = value if self.exact else convert(value, self.dtype)

    def values(self):
        return self.v.astype(np.float64)


def _new(shape, dtype, fill):
    shape = shape if isinstance(shape, tuple) else (shape,)
    t = MTensor(np.zeros(shape), dtype)
    t.v[...] = convert(fill, dtype) if fill is not None else (float("nan") if dtype in FLOATS else -12345)
    return t


class _T:
    """The T. members seed programs here use."""

    @staticmethod
    def Parallel(*extents):
        return range(extents[0]) if len(extents) == 1 else itertools.product(*[range(e) for e in extents])

    max, min = staticmethod(max), staticmethod(min)


for _dt in list(FLOATS) + list(INT_RANGE):
    setattr(_T, _dt, staticmethod(lambda v, _dt=_dt: convert(v, _dt)))


class _Tensor:
    def __class_getitem__(cls, item):
        return None


def exact(*ts):
    for t in ts:
        t.exact = True


def settle(*ts):
    for t in ts:
        t.exact = False
        flat = t.v.reshape(-1)
        for n in range(flat.size):
            flat[n] = convert(flat[n], t.dtype)


def model_source(src):
    """The program as the model runs it: model-only lines (`#@ ...`) uncommented, imports dropped."""
    out = []
    for line in src.splitlines():
        if line.startswith("import "):
            continue
        out.append(re.sub(r"^(\s*)#@ ", r"\1", line))
    return "\n".join(out) + "\n"


def run_model(src, kernel, inputs):
    """Runs kernel of src on inputs [(values, dtype)] -> [(values, dtype)] of its outputs."""
    env = dict(T=_T, tile_kernel=lambda f: f, Tensor=_Tensor, exact=exact, settle=settle,
               zeros=lambda shape, dtype="float32": _new(shape, dtype, 0),
               ones=lambda shape, dtype="float32": _new(shape, dtype, 1),
               full=lambda shape, value, dtype="float32": _new(shape, dtype, value),
               empty=lambda shape, dtype="float32": _new(shape, dtype, None),
               zeros_like=lambda t, dtype=None: _new(t.shape, dtype or t.dtype, 0),
               empty_like=lambda t, dtype=None: _new(t.shape, dtype or t.dtype, None))
    env.update({v: k for k, v in SEED.items()})
    exec(compile(model_source(src), "<model>", "exec"), env)
    outs = env[kernel](*[MTensor(v, dt) for v, dt in inputs])
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [(o.values(), o.dtype) for o in outs]


def finish(p, kernel="k"):
    """Adds the model's outputs to p as exact references."""
    for values, dt in run_model(p.src, kernel, [(v, dt) for _, v, dt in p.ins]):
        p.add_out(values, dt, EXACT)
    p.seed = True
    return p


def seed_vals(rs, shape, dt, scale=64, lo=None, hi=None):
    """Small dyadic fractions (or integers) that every float dtype holds exactly."""
    if dt == "float8_e4m3":
        return rs.randint(-15, 16, shape) / 8.0
    if dt == "float8_e5m2":
        return rs.randint(-7, 8, shape) / 4.0
    if dt in FLOATS:
        return rs.randint(-scale, scale + 1, shape) / float(scale)
    a, b = INT_RANGE[dt]
    lo = a if lo is None else max(a, lo)
    hi = b if hi is None else min(b, hi)
    return rs.randint(lo, hi + 1, shape).astype(np.float64)


def tensor_param(name, dt):
    return "%s: Tensor[%s]" % (name, SEED[dt])


def shape_src(shape):
    return "(%s)" % (", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))


class Src:
    """Lines of a kernel body with indentation."""

    def __init__(self):
        self.lines = []
        self.depth = 1

    def add(self, text, model=False):
        self.lines.append("    " * self.depth + ("#@ " if model else "") + text + "\n")

    def open(self, text):
        self.add(text)
        self.depth += 1

    def close(self, n=1):
        self.depth -= n


def kernel(name, params, body, outs):
    return (HEADER % name + "@tile_kernel\ndef k(%s):\n" % ", ".join(params) + "".join(body.lines) +
            "    return %s\n" % ", ".join(outs))


def rng_src(lo, hi):
    return "range(%s)" % hi if lo == 0 else "range(%s, %s)" % (lo, hi)


def holds(wide, narrow):
    """Does float dtype wide hold every value of narrow (language.md 3.5: a lossless cast)?"""
    order = {"float8_e4m3": ["float16", "bfloat16", "float32", "float64"], "float8_e5m2": ["float16", "bfloat16", "float32", "float64"],
             "float16": ["float32", "float64"], "bfloat16": ["float32", "float64"], "float32": ["float64"], "float64": []}
    return wide == narrow or wide in order[narrow]


def copy_nest(s, dst, src_expr_of, shape, vars_="pqr"):
    """dst[idx] = src_expr_of(idx) over all of shape."""
    vs = vars_[: len(shape)]
    for v, n in zip(vs, shape):
        s.open("for %s in range(%d):" % (v, n))
    idx = ", ".join(vs)
    s.add("%s[%s] = %s" % (dst, idx, src_expr_of(idx)))
    s.close(len(shape))


# ---------------------------------------------------------------- matrix products in loops
def gen_seed_gemm(R, rs, name):
    """A loop nest C[b.., i, j] += X * Y on and around the gemm rule of language.md 3.5."""
    intmode = R.random() < 0.1
    if intmode:
        dta = dtb = "int8"
        dtc = R.choice(["int32", "int32", "int8"])
    else:
        dta = R.choice(["float16", "float16", "bfloat16", "float32", "float8_e4m3"])
        dtb = R.choice([dta, dta, "float16", "float32", "bfloat16"])
        dtc = R.choice(["float32", "float32", "float16", "float16", "bfloat16", "float64"])
    near = R.choice([None] * 8 + ["offset_a", "offset_b", "offset_c", "tri_k", "tri_j", "alias_a", "alias_b", "two", "narrow_op",
                                  "narrow_sum", "bound_c", "c_swapped", "store_cast", "lossless"])
    if intmode and near in ("narrow_op", "narrow_sum", "store_cast", "lossless"):
        near = None
    batch = R.random() < 0.2 and near not in ("alias_a", "alias_b", "c_swapped")
    big = R.random() < 0.15
    M, N, K = (R.choice([16, 24, 33]), R.choice([8, 16, 20]), R.choice([16, 32, 40])) if big else (R.randint(1, 7), R.randint(1, 7), R.randint(1, 9))
    if near in ("alias_a", "alias_b"):
        M = N = K = R.randint(2, 5)
    if near in ("tri_k", "tri_j"):
        K = max(K, M)
        N = max(N, M)
    nb = R.randint(1, 3) if batch else 0
    tA, tB = R.random() < 0.35, R.random() < 0.35
    role = R.choice(["out", "out", "temp", "input"])
    init = R.choice(["zeros", "zeros", "full", "init"]) if role != "input" else "input"
    if near == "bound_c":
        init = R.choice(["full", "init"]) if role != "input" else "input"
    form = R.choice(["+=", "add", "add_r"]) if near not in ("narrow_sum", "store_cast") else R.choice(["add", "add_r"])
    swap_ops = R.random() < 0.3
    vs = (["n"] if batch else []) + ["i", "j", "k"]
    order = vs[:]
    R.shuffle(order)
    if near == "tri_k" and order.index("i") > order.index("k"):
        order.remove("i"); order.insert(order.index("k"), "i")
    if near == "tri_j" and order.index("i") > order.index("j"):
        order.remove("i"); order.insert(order.index("j"), "i")
    dims = dict(n=nb, i=M, j=N, k=K)
    if near in ("tri_k", "tri_j"):
        M = max(M, 2)  # a triangle needs two rows: a loop of one iteration is inlined, its range no longer depends on i
        dims["i"] = M
    ranges = {}
    for v in vs:
        n = dims[v]
        if near in ("tri_k", "tri_j") and v == "i":
            ranges[v] = (0, n)
        elif R.random() < 0.25 and n > 1:
            lo = R.randint(0, n - 1)
            ranges[v] = (lo, R.randint(lo + 1, n))
        else:
            ranges[v] = (0, n)
    scale = 8 if near in ("alias_a", "alias_b") else 64
    bt = ["n"] if batch else []
    # operands: shapes and index sources
    a_idx = bt + (["k", "i"] if tA else ["i", "k"])
    b_idx = bt + (["j", "k"] if tB else ["k", "j"])
    c_idx = bt + (["j", "i"] if near == "c_swapped" else ["i", "j"])
    shape_of = lambda idx: tuple(dims[v] for v in idx)
    a_shape, b_shape, c_shape = list(shape_of(a_idx)), list(shape_of(b_idx)), list(shape_of(c_idx))
    a_src, b_src, c_src = list(a_idx), list(b_idx), list(c_idx)
    for which, src, shp in (("offset_a", a_src, a_shape), ("offset_b", b_src, b_shape), ("offset_c", c_src, c_shape)):
        if near == which:
            d = R.randrange(len(src))
            src[d] += " + 1"
            shp[d] += 1
    params, ins = [], []
    s = Src()
    a_name, b_name, c_name = "a", "b", "c"
    if near == "alias_a" or near == "alias_b":
        c_name = "a" if near == "alias_a" else "b"
        # the aliased operand is the temporary C: a square matrix initialized from an input
        params.append(tensor_param("x0", dtc))
        ins.append((seed_vals(rs, c_shape, dtc, scale), dtc))
        s.add("%s = empty(%s, %s)" % (c_name, shape_src(c_shape), SEED[dtc]))
        copy_nest(s, c_name, lambda idx: "x0[%s]" % idx, c_shape)
        if near == "alias_a":
            dta = dtc
            a_shape = c_shape
        else:
            dtb = dtc
            b_shape = c_shape
    if c_name != "a":
        params.insert(0, tensor_param("a", dta)); ins.insert(0, (seed_vals(rs, a_shape, dta, scale), dta))
    if c_name != "b":
        pos = 1 if c_name != "a" else 0
        params.insert(pos, tensor_param("b", dtb)); ins.insert(pos, (seed_vals(rs, b_shape, dtb, scale), dtb))
    if init == "input":
        c_name = "c0"
        params.append(tensor_param("c0", dtc)); ins.append((seed_vals(rs, c_shape, dtc, scale), dtc))
    elif c_name == "c":
        if init == "zeros":
            s.add("c = zeros(%s, %s)" % (shape_src(c_shape), SEED[dtc]))
        elif init == "full":
            s.add("c = full(%s, %s, %s)" % (shape_src(c_shape), R.choice(["0.5", "-1.25", "2.0", "3"] if dtc in FLOATS else ["3", "-2"]), SEED[dtc]))
        else:
            params.append(tensor_param("cinit", dtc)); ins.append((seed_vals(rs, c_shape, dtc, scale), dtc))
            s.add("c = empty(%s, %s)" % (shape_src(c_shape), SEED[dtc]))
            copy_nest(s, "c", lambda idx: "cinit[%s]" % idx, c_shape)
    two = near == "two"
    if two:
        dtd = R.choice([dtc, "float32"]) if not intmode else "int32"
        s.add("d = zeros(%s, %s)" % (shape_src(c_shape), SEED[dtd]))
    # the nest
    X = "%s[%s]" % (a_name, ", ".join(a_src))
    Y = "%s[%s]" % (b_name, ", ".join(b_src))
    if near == "lossless":
        X = "T.%s(%s)" % (R.choice([t for t in ("float32", "float64") if holds(t, dta)]), X)
    if near == "narrow_op" and dta != "float8_e4m3":
        X = "T.float8_e4m3(%s)" % X
    elif near == "narrow_op":
        Y = "T.float8_e4m3(%s)" % Y if dtb != "float8_e4m3" else "T.float8_e5m2(%s)" % Y
    P = "%s * %s" % ((Y, X) if swap_ops else (X, Y))
    C = "%s[%s]" % (c_name, ", ".join(c_src))
    nd = None
    if near == "narrow_sum":
        nd = R.choice([t for t in ("float16", "bfloat16", "float8_e4m3") if not holds(t, dtc)])
    elif near == "store_cast":
        nd = dtc
    if form == "+=":
        stmt = "%s += %s" % (C, P)
    else:
        value = "%s + %s" % (C, P) if form == "add" else "%s + %s" % (P, C)
        stmt = "%s = %s" % (C, "T.%s(%s)" % (nd, value) if nd else value)
    bound_c = "%s[%s]" % (c_name, ", ".join(["0"] * len(c_shape)))
    floats_ok = not intmode and all(t in ("float16", "bfloat16", "float32", "float8_e4m3") for t in (dta, dtb, dtc))
    narrow_op_real = near == "narrow_op"
    match = floats_ok and near in (None, "c_swapped", "store_cast", "lossless")
    # simplify inlines loops of one iteration before recognition: the innermost loop that is left counts
    innermost = [v for v in order if not (v in ("i", "j", "n", "k") and ranges[v][1] - ranges[v][0] == 1 and
                                          not (v == "k" and near in ("tri_k", "bound_c")) and not (v == "j" and near == "tri_j"))]
    promoted = not match and innermost[-1:] == ["k"] and near not in ("alias_a", "alias_b", "bound_c", "narrow_sum") and not intmode
    exact_ts = [c_name] + (["d"] if two else [])
    if match or promoted:
        s.add("exact(%s)" % ", ".join(exact_ts), model=True)
    par = R.random() < 0.25
    depth = 0
    pos = 0
    while pos < len(order):
        v = order[pos]
        lo, hi = ranges[v]
        if par and v == "i" and pos + 1 < len(order) and order[pos + 1] == "j" and ranges["i"] == (0, M) and ranges["j"] == (0, N) \
                and near != "tri_j":
            s.open("for i, j in T.Parallel(%d, %d):" % (M, N))
            depth += 1
            pos += 2
            continue
        if v == "k" and near == "tri_k":
            r = R.choice(["range(i, %d)" % K, "range(min(i + 1, %d))" % K])
        elif v == "j" and near == "tri_j":
            r = "range(i, %d)" % N
        elif v == "k" and near == "bound_c":
            r = "range(min(int(abs(%s)) + 1, %d))" % (bound_c, hi)
        else:
            r = rng_src(lo, hi)
        s.open("for %s in %s:" % (v, r))
        depth += 1
        pos += 1
    s.add(stmt)
    if two:
        s.add(R.choice(["d[%s] += %s" % (", ".join(c_src), P), "d[%s] = d[%s] + %s" % (", ".join(c_src), ", ".join(c_src), X)]))
    s.close(depth)
    if match or promoted:
        s.add("settle(%s)" % ", ".join(exact_ts), model=True)
    outs = []
    if role == "out" and c_name == "c":
        outs.append("c")
    else:
        dto = R.choice([dtc, "float32"]) if not intmode else dtc
        if dtc == "float64":
            dto = "float64"
        s.add("out = empty(%s, %s)" % (shape_src(c_shape), SEED[dto]))
        factor = R.choice(["", " * 2.0", " + 1.0"]) if not intmode else ""
        copy_nest(s, "out", lambda idx: "%s[%s]%s" % (c_name, idx, factor), c_shape)
        outs.append("out")
    if two:
        outs.append("d")
    p = Prog(name, "seed_gemm", kernel(name, params, s, outs),
             dict(near=near, dt=[dta, dtb, dtc], batch=nb, MNK=[M, N, K], tA=tA, tB=tB, order="".join(order), role=role, init=init,
                  form=form, match=match, promoted=promoted))
    for v, dt in ins:
        p.add_in(v, dt)
    return finish(p)


# ---------------------------------------------------------------- fused epilogues
EPI_EXPRS = ["acc[i, j] * 0.5 + bias[j]", "max(acc[i, j] + bias[j], 0.0)", "acc[i, j] * e[i, j]", "min(acc[i, j], 1.0) - bias[j]",
             "T.max(acc[i, j], -0.5) * 2.0", "acc[i, j]"]


def gen_seed_epi(R, rs, name):
    """A gemm into a temporary acc (zeros, then the recognized nest) and the elementwise nest after it,
    on and around the fused-epilogue rule of language.md 3.5."""
    dta = R.choice(["float16", "bfloat16", "float32"])
    dtacc = R.choice(["float32", "float32", "float32", "float16", "bfloat16"])
    dto = R.choice(["float32", "float16", "bfloat16", dta])
    M, N, K = R.randint(1, 9), R.randint(1, 9), R.randint(1, 12)
    if R.random() < 0.15:
        M, N, K = R.choice([16, 40]), R.choice([24, 32]), R.choice([16, 64])
    v = R.choice(["plain", "plain", "let", "two_outs", "sub_region", "c_later", "c_later_elem", "write_a", "write_b", "read_out_other",
                  "read_c_other", "read_c_t", "swapped_loops", "not_cleared", "partial_k", "partial_rows", "out_rw", "read_a", "int_out",
                  "if_body", "two_epilogues"])
    if v == "write_a":
        K = N
    if v == "write_b":
        K = M
    if v in ("read_c_t", "swapped_loops") and R.random() < 0.7:
        N = M
    if v == "partial_rows" and M < 2:
        M = 2
    if v == "sub_region" and M < 2 and N < 2:
        M = 3
    params = [tensor_param("a", dta), tensor_param("w", dta), "bias: Tensor[FP32]", "e: Tensor[FP32]"]
    ins = [(seed_vals(rs, (M, K), dta), dta), (seed_vals(rs, (K, N), dta), dta), (seed_vals(rs, (N,), "float32"), "float32"),
           (seed_vals(rs, (M, N), "float32", 8), "float32")]
    s = Src()
    if v == "not_cleared":
        s.add("acc = full((%d, %d), 0.5, %s)" % (M, N, SEED[dtacc]))
    else:
        s.add("acc = zeros((%d, %d), %s)" % (M, N, SEED[dtacc]))
    s.add("exact(acc)", model=True)
    ri = "range(1, %d)" % M if v == "partial_rows" else "range(%d)" % M
    rk = "range(%d)" % max(1, K // 2) if v == "partial_k" else "range(%d)" % K
    s.open("for i in %s:" % ri)
    s.open("for j in range(%d):" % N)
    s.open("for k in %s:" % rk)
    s.add("acc[i, j] += a[i, k] * w[k, j]")
    s.close(3)
    s.add("settle(acc)", model=True)
    outs = ["out"]
    if v in ("sub_region", "read_out_other", "out_rw", "if_body"):
        s.add("out = full((%d, %d), %s, %s)" % (M, N, R.choice(["0.0", "1.0", "-2.0"]), SEED[dto]))
    elif v == "int_out":
        dto = "int32"
        s.add("out = empty((%d, %d), INT32)" % (M, N))
    else:
        s.add("out = empty((%d, %d), %s)" % (M, N, SEED[dto]))
    if v == "two_outs":
        s.add("out2 = empty((%d, %d), FP32)" % (M, N))
        outs.append("out2")
    expr = R.choice(EPI_EXPRS)
    if v == "swapped_loops":
        s.open("for j in range(%d):" % N)
        s.open("for i in range(%d):" % M)
    elif v == "sub_region":
        s.open("for i in %s:" % (R.choice(["range(1, %d)", "range(%d - 1)"]) % M if M > 1 else "range(%d)" % M))
        s.open("for j in %s:" % ("range(1, %d)" % N if M == 1 else "range(%d)" % N))
    else:
        s.open("for i in range(%d):" % M)
        s.open("for j in range(%d):" % N)
    if v == "let":
        s.add("t = %s" % expr)
        s.add("out[i, j] = t * 2.0 + e[i, j]")
    elif v == "two_outs":
        s.add("out[i, j] = %s" % expr)
        s.add("out2[i, j] = acc[i, j] - bias[j]")
    elif v == "write_a":
        s.add("a[i, j] = acc[i, j] * 0.5")
        s.add("out[i, j] = a[i, j] + %s" % expr)
    elif v == "write_b":
        s.add("w[j, i] = acc[i, j] * 0.5" if M == N and R.random() < 0.5 else "w[i, j] = acc[i, j] * 0.5")
        s.add("out[i, j] = %s" % expr)
    elif v == "read_out_other":
        s.add("out[i, j] = %s + out[%s]" % (expr, R.choice(["i, 0", "0, j", "i, %d" % (N - 1)])))
    elif v == "read_c_other":
        s.add("out[i, j] = %s + acc[%s]" % (expr, R.choice(["0, j", "i, 0", "%d, %d" % (M - 1, N - 1)])))
    elif v == "read_c_t":
        s.add("out[i, j] = acc[%s] + bias[j]" % ("j, i" if M == N else "%d - 1 - i, j" % M))
    elif v == "out_rw":
        s.add("out[i, j] = out[i, j] * 2.0 + %s" % expr)
    elif v == "read_a":
        s.add("out[i, j] = %s + a[i, 0] + w[0, j]" % expr)
    elif v == "int_out":
        s.add("out[i, j] = T.int32((%s) * 64.0)" % expr)
    elif v == "if_body":
        s.open("if acc[i, j] > 0.0:")
        s.add("out[i, j] = %s" % expr)
        s.close()
    else:
        s.add("out[i, j] = %s" % expr)
    s.close(2)
    if v == "c_later":
        s.add("out3 = empty((%d, %d), FP32)" % (M, N))
        copy_nest(s, "out3", lambda idx: "acc[%s] * 2.0" % idx, (M, N))
        outs.append("out3")
    elif v == "c_later_elem":
        s.add("out3 = zeros((1,), FP32)")
        s.add("out3[0] = acc[%d, %d]" % (M - 1, N - 1))
        outs.append("out3")
    elif v == "two_epilogues":
        s.add("out3 = empty((%d, %d), FP32)" % (M, N))
        copy_nest(s, "out3", lambda idx: "acc[%s] - e[%s]" % (idx, idx), (M, N))
        outs.append("out3")
    p = Prog(name, "seed_epi", kernel(name, params, s, outs), dict(v=v, dt=[dta, dtacc, dto], MNK=[M, N, K], expr=expr))
    for x, dt in ins:
        p.add_in(x, dt)
    return finish(p)


# ---------------------------------------------------------------- reductions
def gen_seed_reduce(R, rs, name):
    """s[idx] = s[idx] (+|max|min) term over loop nests, on and around the reduction rule of
    language.md 3.5 (promote_reductions)."""
    ds = R.choice(["float16", "float16", "bfloat16", "float32", "float64", "int8", "int32", "int64", "uint8"])
    if ds in FLOATS:
        dx = R.choice(["float16", "bfloat16", "float32", "float64", "int8"] + [ds] * 2)
    else:
        dx = R.choice(["int8", "int32", "uint8", "float32"] + [ds])
    op = R.choice(["add", "add", "add", "max", "min"])
    v = R.choice(["plain"] * 6 + ["if", "let", "narrow_step", "bound_reads_s", "idx_reads_written", "extra_store", "two_reds",
                                  "term_reads_s", "full_2d", "three_deep", "scalar_acc", "self_index"])
    if ds not in FLOATS and (v == "narrow_step" or (dx in FLOATS and v == "term_reads_s")):
        v = "plain"  # (an integer s plus float terms computes in float32: a growing s would round there)
    M, L = R.randint(1, 6), R.randint(1, 40)
    if R.random() < 0.2:
        M, L = R.choice([8, 64]), R.choice([64, 256])
    D3 = R.randint(1, 5)
    xs = (M, L, D3) if v == "three_deep" else (M, L)
    int_lo = {"int8": -100, "uint8": 0, "int32": -1000, "int64": -1000}
    def xvals(shape, dt):
        if dt in FLOATS:
            return seed_vals(rs, shape, dt)
        return seed_vals(rs, shape, dt, lo=int_lo[dt], hi=-int_lo[dt] if dt != "uint8" else 255)
    params = [tensor_param("x", dx), tensor_param("w", dx)]
    ins = [(xvals(xs, dx), dx), (xvals((L,), dx), dx)]
    s = Src()
    if v == "idx_reads_written":
        M, L = min(M, 4), min(L, 10)
    n_s = M * L + 1 if v == "idx_reads_written" else M
    init = R.choice(["zeros", "full", "input"])
    if v == "bound_reads_s":
        init = "full"
    if init == "input":
        params.append(tensor_param("s0", ds))
        ins.append((xvals((n_s,), ds), ds))
        s.add("s = empty((%d,), %s)" % (n_s, SEED[ds]))
        copy_nest(s, "s", lambda idx: "s0[%s]" % idx, (n_s,))
    elif init == "full":
        fv = R.choice(["1", "2", "3"]) if ds not in FLOATS or v == "bound_reads_s" else R.choice(["0.5", "-1.5", "100.0"])
        s.add("s = full((%d,), %s, %s)" % (n_s, fv, SEED[ds]))
    else:
        s.add("s = zeros((%d,), %s)" % (n_s, SEED[ds]))
    outs = ["s"]
    term = R.choice(["x[i, j]", "x[i, j] * w[j]", "x[i, j] * 2", "abs(x[i, j])", "w[j] - x[i, j]"])
    if v == "three_deep":
        term = "x[i, j, q]"
    if dx in FLOATS and ds in FLOATS and R.random() < 0.2:
        term = "T.%s(%s)" % (R.choice(["float16", "bfloat16", "float8_e4m3"]), term)  # a term rounding: still a reduction
    tgt = "s[i]"
    if v == "full_2d":
        tgt = "s[%d]" % R.randrange(M)
    if v == "idx_reads_written":
        tgt = "s[t[0]]"
        s.add("t = zeros((1,), INT32)")
        outs.append("t")
    if v == "self_index":
        ds_i = ds
        tgt = "s[min(abs(int(s[0])), %d)]" % (M - 1)
    def update(target, t):
        if op == "add":
            return R.choice(["%s += %s" % (target, t), "%s = %s + %s" % (target, target, t), "%s = %s + %s" % (target, t, target)])
        fn = R.choice([op, "T." + op])
        return R.choice(["%s = %s(%s, %s)" % (target, fn, target, t), "%s = %s(%s, %s)" % (target, fn, t, target)])
    stmt = update(tgt, term)
    nd = None
    if v == "narrow_step":
        nd = R.choice([t for t in ("float16", "bfloat16", "float8_e4m3") if not holds(t, ds)] + ([ds] if ds != "float64" else []))
        comb = ("%s + %s" % (tgt, term)) if op == "add" else "%s(%s, %s)" % (op, tgt, term)
        stmt = "%s = T.%s(%s)" % (tgt, nd, comb)
    # does the rule of 3.5 give the nest an accumulator?  (then the model sums exactly, rounds once)
    float_acc = ds in FLOATS
    promoted = v in ("plain", "two_reds", "full_2d", "three_deep") or (v == "narrow_step" and nd == ds)
    if ds not in FLOATS and dx in FLOATS:
        promoted = False  # int(s + float term): truncates and saturates every step, the model runs it as written
    reds = ["s"]
    if v == "scalar_acc":
        s.open("for i in range(%d):" % M)
        s.add("acc = %s" % ("0.0" if ds in FLOATS and dx in FLOATS else "0" if ds not in FLOATS else "0.0"))
        s.open("for j in range(%d):" % L)
        s.add(update("acc", term).replace("acc = T.%s(" % op, "acc = %s(" % op))
        s.close()
        s.add("s[i] = %s" % ("acc" if op == "add" else "%s(s[i], acc)" % op))
        s.close()
        p = Prog(name, "seed_reduce", kernel(name, params, s, outs), dict(v=v, ds=ds, dx=dx, op=op, ML=[M, L], init=init))
        for x, dt in ins:
            p.add_in(x, dt)
        # a float32 mutable scalar is an accumulator: exact here, rounded once at s[i] (ints: wrap)
        return finish(p)
    if v == "two_reds":
        dm = R.choice([ds, "float32"]) if ds in FLOATS else ds
        s.add("m = full((%d,), %s, %s)" % (M, "-100" if dm not in FLOATS else "-100.0", SEED[dm]))
        outs.append("m")
        reds.append("m")
    if promoted and float_acc:
        s.add("exact(%s)" % ", ".join(reds), model=True)
    if v == "full_2d":
        s.open("for i in range(%d):" % M)
        s.open("for j in range(%d):" % L)
        depth = 2
    else:
        s.open("for i in range(%d):" % M)
        if v == "bound_reads_s":
            s.open("for j in range(min(abs(int(s[i])) + %d, %d)):" % (R.randint(0, 3), L))
        else:
            s.open("for j in range(%d):" % L)
        depth = 2
        if v == "three_deep":
            s.open("for q in range(%d):" % D3)
            depth = 3
    if v == "if":
        s.open("if x[i, j] > %s:" % ("0" if dx not in FLOATS else "0.0"))
        s.add(stmt)
        s.close()
    elif v == "let":
        s.add("t = %s" % term)
        s.add(update(tgt, "t"))
    elif v == "idx_reads_written":
        s.add(stmt)
        s.add("t[0] = t[0] + 1")
    elif v == "extra_store":
        s.add("y[i, j] = x[i, j]")
        s.add(stmt)
    elif v == "two_reds":
        s.add(stmt)
        s.add("m[i] = max(m[i], %s)" % term)
    elif v == "term_reads_s":
        s.add(update(tgt, "%s * s[%d]" % (term, R.randrange(M)) if ds in FLOATS else "%s + s[%d]" % (term, R.randrange(M))))
    else:
        s.add(stmt)
    s.close(depth)
    if promoted and float_acc:
        s.add("settle(%s)" % ", ".join(reds), model=True)
    if v == "extra_store":
        s.lines.insert(0, "    y = empty((%d, %d), %s)\n" % (M, L, SEED[dx]))
        outs.append("y")
    p = Prog(name, "seed_reduce", kernel(name, params, s, outs), dict(v=v, ds=ds, dx=dx, op=op, ML=[M, L], init=init, promoted=promoted))
    for x, dt in ins:
        p.add_in(x, dt)
    return finish(p)


# ---------------------------------------------------------------- parallel and vector loops
LOOP_BODIES = [  # (name, loop header, body lines, y's extra length): serial semantics, whatever the schedule
    ("indep", "for i in range(N):", ["y[i] = x[i] * 3 + z[i]"], 0),
    ("carry", "for i in range(N):", ["y[i + 1] = y[i] * 3 + x[i]"], 1),
    ("two_offsets", "for i in range(N):", ["y[i] = y[i] + x[i]", "y[i + 1] = y[i + 1] - y[i]"], 1),
    ("read_next", "for i in range(N):", ["y[i] = y[i + 1] * 2 + x[i]"], 1),
    ("read_prev", "for i in range(1, N):", ["y[i] = y[i - 1] - x[i]"], 0),
    ("reverse", "for i in range(N):", ["y[i] = y[N - 1 - i] + x[i]"], 0),
    ("backward", "for i in range(N - 1, 0, -1):", ["y[i] = y[i - 1] + x[i]"], 0),
    ("stride", "for i in range(0, N - 1, 2):", ["y[i + 1] = y[i] + x[i]"], 0),
    ("stride_indep", "for i in range(0, N, 2):", ["y[i] = x[i] * 2", "y[i + 1] = x[i + 1] - x[i]"], 1),
    ("scatter", "for i in range(N):", ["y[idx[i]] = y[idx[i]] + x[i]"], 0),
    ("gather_written", "for i in range(N):", ["y[i] = x[i] + y[idx[i]]"], 0),
    ("hint", "for i in T.Parallel(N):", ["y[i + 1] = y[i] + x[i]"], 1),
    ("hint_indep", "for i in T.Parallel(N):", ["y[i] = y[i] * 2 + x[i]"], 0),
    ("scalar", "for i in range(N):", ["t = t * 3 + x[i]", "y[i] = t"], 0),
    ("if_carry", "for i in range(N):", ["if x[i] > 0:", "    y[i + 1] = y[i] + x[i]", "else:", "    y[i + 1] = y[i] - 1"], 1),
    ("cross", "for i in range(N):", ["y[i] = z2[i + 1] + x[i]", "z2[i] = y[i] * 2"], 1),
    ("rewrite", "for i in range(N):", ["y[i] = x[i]", "y[i] = y[i] * 2 + z[i]"], 0),
    ("let_indep", "for i in range(N):", ["u = x[i] * 2", "y[i] = u + y[i]"], 0),
    ("mod_index", "for i in range(N):", ["y[i % 7] = y[i % 7] + x[i]"], 0),
    ("offset_invariant", "for i in range(N - 8):", ["y[i + off[0]] = x[i] + y[i + off[0]]"], 0),
    ("offset_written", "for i in range(N - 8):", ["y[i + off[0]] = x[i]", "off[0] = (off[0] + 1) % 8"], 0),
    ("shift_both", "for i in range(N):", ["y[i + 1] = x[i]", "z2[i] = y[i]"], 1),
]

LOOP2_BODIES = [  # 2-D: (name, headers, body lines)
    ("rows_indep", ["for i in range(H):", "for j in range(W):"], ["y2[i, j] = x2[i, j] * 2 + y2[i, j]"]),
    ("row_scan", ["for i in range(H):", "for j in range(1, W):"], ["y2[i, j] = y2[i, j - 1] + x2[i, j]"]),
    ("col_scan", ["for i in range(1, H):", "for j in range(W):"], ["y2[i, j] = y2[i - 1, j] * 2 - x2[i, j]"]),
    ("transpose_inplace", ["for i in range(H):", "for j in range(W):"], ["y2[i, j] = y2[j % H, i % W] + x2[i, j]"]),
    ("row_sum", ["for i in range(H):", "for j in range(W):"], ["r[i] = r[i] + x2[i, j]"]),
    ("row_sum_dep", ["for i in range(1, H):", "for j in range(W):"], ["if j == 0:", "    r[i] = r[i] + r[i - 1]", "r[i] = r[i] + x2[i, j]"]),
    ("diag", ["for i in range(H):", "for j in range(W):"], ["y2[i, j] = y2[i, j] + y2[i, i % W]"]),
    ("inner_carry", ["for i in range(H):", "for j in range(W - 1):"], ["y2[i, j + 1] = y2[i, j] * 3 + x2[i, j]"]),
]


def gen_seed_loops(R, rs, name):
    """Loops large enough for the CPU schedule's threads (language.md 3.5: at least 2^14 iterations x
    statements) whose iterations are independent, or only look it; int32 (wrapping: exact) or float32."""
    dt = R.choice(["int32", "int32", "float32"])
    s = Src()
    if R.random() < 0.6:
        vname, header, body, extra = R.choice(LOOP_BODIES)
        N = R.choice([16384, 20000, 40000, 70001]) if R.random() < 0.8 else R.choice([100, 1000])
        if vname == "stride_indep" and N % 2:
            N += 1
        params = [tensor_param("x", dt), tensor_param("z", dt), "idx: Tensor[INT32]", "off: Tensor[INT32]", tensor_param("y0", dt)]
        vals_of = lambda shape: seed_vals(rs, shape, dt, lo=-50, hi=50) if dt == "int32" else rs.randint(-8, 9, shape) / 8.0
        ins = [(vals_of((N,)), dt), (vals_of((N,)), dt), (rs.randint(0, N, (N,)).astype(np.float64), "int32"),
               (np.array([R.randint(0, 8)], dtype=np.float64), "int32"), (vals_of((N + extra,)), dt)]
        s.add("N = %d" % N)
        s.add("y = empty((%d,), %s)" % (N + extra, SEED[dt]))
        copy_nest(s, "y", lambda i: "y0[%s]" % i, (N + extra,))
        s.add("z2 = zeros((%d,), %s)" % (N + 1, SEED[dt]))
        if vname == "scalar":
            s.add("t = %s" % ("0" if dt == "int32" else "0.0"))
        outs = ["y"] + (["z2"] if vname in ("cross", "shift_both") else [])
        if dt == "float32" and vname in ("carry", "read_next", "scalar", "inner_carry"):
            body = [b.replace("* 3", "* 0.5") for b in body]
        s.open(header)
        for b in body:
            s.add(b)
            if vname == "scalar" and dt == "float32" and b.startswith("t ="):
                s.add("t = T.float32(t)", model=True)  # a float32 mutable scalar rounds at every assignment
        s.close()
        if vname == "offset_written":
            outs.append("offw")
            s.add("offw = zeros((1,), INT32)")
            s.add("offw[0] = off[0]")
            # off is an input here: written in place, its new value goes out through offw
    else:
        vname, headers, body = R.choice(LOOP2_BODIES)
        H, W = R.choice([(128, 128), (256, 100), (64, 512), (300, 64)])
        params = [tensor_param("x2", dt), tensor_param("y0", dt)]
        vals_of = lambda shape: seed_vals(rs, shape, dt, lo=-50, hi=50) if dt == "int32" else rs.randint(-8, 9, shape) / 8.0
        ins = [(vals_of((H, W)), dt), (vals_of((H, W)), dt)]
        s.add("H = %d" % H)
        s.add("W = %d" % W)
        s.add("y2 = empty((%d, %d), %s)" % (H, W, SEED[dt]))
        copy_nest(s, "y2", lambda i: "y0[%s]" % i, (H, W))
        s.add("r = zeros((%d,), %s)" % (H, SEED[dt]))
        if dt == "float32":
            body = [b.replace("* 3", "* 0.5").replace("* 2 -", "* 0.5 -") for b in body]
        for h in headers:
            s.open(h)
        for b in body:
            s.add(b)
        s.close(len(headers))
        outs = ["r"] if vname.startswith("row_sum") else ["y2"]
    p = Prog(name, "seed_loops", kernel(name, params, s, outs), dict(v=vname, dt=dt))
    for x, d in ins:
        p.add_in(x, d)
    return finish(p)


FAMILIES = {"seed_gemm": gen_seed_gemm, "seed_epi": gen_seed_epi, "seed_reduce": gen_seed_reduce, "seed_loops": gen_seed_loops}
