"""Random families of tools/difftest for the language's constructs beyond the gemm-centred ones of
families.py: scheduled T.Pipelined loops (order / stage / group, warp_specialize), T.Parallel nests
with broadcasting, index arithmetic and conditions on ragged shapes, casts among every dtype,
integer operators, multi-step reductions along any axis, atomics, thread-level code, symbolic
shapes, and invalid programs that must fail with a located error. Each generator has the signature
of families.py's (R, rs, name) -> Prog. A library module of tools/difftest (difftest.py runs the tool)."""
import numpy as np
import npy_io
from families import Prog, TOL, cdiv, pad2, vals

HEADER = "import tilelang.language as T\n\n# %s\n"
I = "        "      # the body of `with T.Kernel`
J = I + "    "      # one loop deeper
K2 = J + "    "     # two loops deeper


def kernel_src(name, params, grid, threads, body, swizzle=0):
    """A @T.prim_func named main with one T.Kernel over grid (a tuple of extents) running body (lines)."""
    names = ("bx", "by", "bz")[: len(grid)]
    L = [HEADER % name, "@T.prim_func\ndef main(%s):\n" % ", ".join(params)]
    L.append("    with T.Kernel(%s, threads=%r) as %s:\n" % (", ".join(str(g) for g in grid), threads,
                                                             names[0] if len(names) == 1 else "(%s)" % ", ".join(names)))
    if swizzle:
        L.append(I + "T.use_swizzle(panel_size=%d)\n" % swizzle)
    L += body
    return "".join(L)


def tensor(name, shape, dt):
    """A parameter's annotation; a str in shape is a symbolic size's name."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    return "%s: T.Tensor((%s), %r)" % (name, dims, dt)


def tiles(x, nby, bM, nbx, bN):
    """A padded (nby*bM, nbx*bN) array as (nby, nbx, bM, bN) tiles."""
    return x.reshape(nby, bM, nbx, bN).transpose(0, 2, 1, 3)


def untile(t):
    nby, nbx, bM, bN = t.shape
    return t.transpose(0, 2, 1, 3).reshape(nby * bM, nbx * bN)


INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}


def cast_ref(x, dt):
    """T.cast's value (language.md 4.6): floats round to nearest even (e4m3 saturates, also from inf),
    float to integer truncates toward zero and saturates, anything to bool is whether it is nonzero."""
    x = np.asarray(x, dtype=np.float64)
    if dt == "bool":
        return (x != 0).astype(np.float64)
    if dt in INT_RANGE:
        lo, hi = INT_RANGE[dt]
        return np.clip(np.trunc(x), lo, hi)
    if dt == "float8_e4m3":
        return npy_io.round_to(np.clip(x, -448.0, 448.0), dt)
    return npy_io.round_to(x, dt)


def int_vals(rs, shape, dt, lo=None, hi=None):
    a, b = INT_RANGE[dt]
    lo = a if lo is None else max(a, lo)
    hi = b if hi is None else min(b, hi)
    return rs.randint(lo, hi + 1, shape).astype(np.float64)


# ---------------------------------------------------------------- scheduled T.Pipelined loops
def gen_sched(R, rs, name):
    """A gemm loop with a pre-pass over the A tile and a running column sum of B inside the loop,
    under plain, scheduled (order / stage / group; the gemm a step late) and warp-specialized loops."""
    dt = R.choice(["float16", "bfloat16"])
    bM, bN, bK = R.choice([64, 64, 128]), R.choice([32, 64, 128]), R.choice([16, 32, 64])
    threads = R.choice([128, 256]) if bM >= 128 else 128
    M = R.randint(max(1, bM // 2), 3 * bM)
    N = 8 * R.randint(max(1, bN // 16), 3 * bN // 8)
    K = 8 * R.randint(1, 24)
    prep = R.choice([None, "scale", "relu", "square"])
    prep_mem = R.choice(["shared", "fragment"])
    colsum = R.random() < 0.4
    sched = R.choice(["plain", "plain", "inorder", "late", "merged"])
    if sched == "late" and not prep:
        sched = "inorder"
    stages = R.choice([0, 1, 2, 3]) if sched == "plain" else R.choice([2, 3])
    # warp specialization needs every load of the loop to go by TMA, ahead (2 stages or more), with
    # 16-byte rows (K, N multiples of 8 here)
    ws = R.choice([None, False, True]) if sched == "plain" else None
    if ws:
        stages = max(stages, 2)
    nbx, nby, nk = cdiv(N, bN), cdiv(M, bM), cdiv(K, bK)
    # the loop's range: all of K, from a later start, every other step, or backwards
    span = R.choice(["all", "all", "start", "step", "reverse"])
    extent, ks = {"all": ("%d" % nk, range(nk)), "start": ("%d, %d" % (nk // 2, nk), range(nk // 2, nk)),
                  "step": ("0, %d, 2" % nk, range(0, nk, 2)), "reverse": ("%d, -1, -1" % (nk - 1), range(nk - 1, -1, -1))}[span]
    params = [tensor("A", (M, K), dt), tensor("B", (K, N), dt), tensor("C", (M, N), "float32")]
    if colsum:
        params.append(tensor("S", (nby, N), "float32"))
    body = [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt),
            I + "B_s = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt)]
    a_tile = "A_s"
    if prep:
        body.append(I + "A_p = T.%s((%d, %d), %r)\n" % ("alloc_shared" if prep_mem == "shared" else "alloc_fragment", bM, bK, dt))
        a_tile = "A_p"
    body.append(I + "C_l = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    body.append(I + "T.clear(C_l)\n")
    if colsum:
        body.append(I + "s = T.alloc_fragment((%d,), 'float32')\n" % bN)
        body.append(I + "T.fill(s, 0.5)\n")
    stmts = [J + "T.copy(A[by * %d, k * %d], A_s)\n" % (bM, bK), J + "T.copy(B[k * %d, bx * %d], B_s)\n" % (bK, bN)]
    if prep:
        expr = {"scale": "A_s[i, j] * 0.5", "relu": "T.max(A_s[i, j], 0.0)", "square": "A_s[i, j] * A_s[i, j]"}[prep]
        stmts.append(J + "for i, j in T.Parallel(%d, %d):\n" % (bM, bK) + K2 + "A_p[i, j] = %s\n" % expr)
    stmts.append(J + "T.gemm(%s, B_s, C_l)\n" % a_tile)
    if colsum:
        stmts.append(J + "T.reduce_sum(B_s, s, dim=0, clear=False)\n")
    n = len(stmts)
    if sched == "plain":
        head = "T.Pipelined(%s, num_stages=%d%s)" % (extent, stages, "" if ws is None else ", warp_specialize=%r" % ws)
    else:
        if sched == "inorder":
            group, order, stage = [[g] for g in range(n)], [-1, -1] + list(range(n - 2)), [-1, -1] + [0] * (n - 2)
        elif sched == "merged":  # everything after the loads in one group
            group, order, stage = [[0], [1], list(range(2, n))], [-1, -1, 0], [-1, -1, 0]
        else:  # late: the gemm (and the column sum) of the step before, then this step's pre-pass
            group = [[g] for g in range(n)]
            order, stage = [-1, -1, n - 3] + list(range(n - 3)), [-1, -1, 0] + [1] * (n - 3)
        head = "T.Pipelined(%s, num_stages=%d, order=%r, stage=%r, group=%r)" % (extent, stages, order, stage, group)
    body.append(I + "for k in %s:\n" % head)
    body += stmts
    body.append(I + "T.copy(C_l, C[by * %d, bx * %d])\n" % (bM, bN))
    if colsum:
        body.append(I + "T.copy(s, S[by, bx * %d])\n" % bN)
    src = kernel_src(name, params, (nbx, nby), threads, body)
    A, B = vals(rs, (M, K), dt), vals(rs, (K, N), dt)
    Ap = pad2(A, nby * bM, nk * bK)
    Ap = {None: Ap, "scale": Ap * 0.5, "relu": np.maximum(Ap, 0), "square": npy_io.round_to(Ap * Ap, dt)}[prep]
    Bp = pad2(B, nk * bK, nbx * bN)
    p = Prog(name, "sched", src, dict(dt=dt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, prep=prep, prep_mem=prep_mem, colsum=colsum,
                                      sched=sched, span=span, stages=stages, ws=ws, threads=threads))
    p.add_in(A, dt)
    p.add_in(B, dt)
    rows = np.concatenate([np.arange(k * bK, (k + 1) * bK) for k in ks] + [np.arange(0)]).astype(int)  # the K rows the loop visits
    p.add_out((Ap[:, rows] @ Bp[rows])[:M, :N], "float32")
    if colsum:
        p.add_out(np.tile(Bp[rows].sum(axis=0)[None, :N] + 0.5, (nby, 1)), "float32")
    return p


# ---------------------------------------------------------------- T.Parallel: broadcasts, indices, conditions
def gen_parallel(R, rs, name):
    """A T.Parallel nest over a tile (a shared tile read from X, or a gemm's accumulator, which lives
    in registers on GPUs) with broadcasts, index arithmetic and conditions, stored whole or guarded."""
    source = R.choice(["tile", "tile", "gemm"])
    idt, odt = R.choice(["float32", "float16", "bfloat16"]), R.choice(["float32", "float16", "bfloat16"])
    if source == "gemm":
        idt = R.choice(["float16", "bfloat16"])
        bM, bN, bK = R.choice([16, 32, 64]), R.choice([16, 32, 64, 128]), R.choice([16, 32])
        threads = 128
    else:
        bM = R.choice([4, 8, 16, 32, 64])
        bN = R.choice([8, 16, 32, 64, 128]) if R.random() < 0.7 else bM
        # at most 64 elements a thread: the element loops are unrolled on GPUs (NVRTC takes minutes past that)
        threads = R.choice([t for t in (32, 64, 128, 256) if bM * bN <= 64 * t])
    M, N = R.randint(1, 3 * bM + 5), R.randint(1, 3 * bN + 5)
    swizzle = R.choice([0, 0, 2, 3])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    Mp, Np = nby * bM, nbx * bN
    rv, cv = vals(rs, (Mp,), "float32"), vals(rs, (Np,), "float32")
    gi, gj = np.meshgrid(np.arange(Mp), np.arange(Np), indexing="ij")  # global indices
    li, lj = gi % bM, gj % bN                                           # indices in the tile
    bx = gj // bN
    choices = ["bcast", "cond", "index", "ifstmt", "minmax", "blockidx"]
    if source == "tile":
        X = vals(rs, (M, N), idt)
        Xp = pad2(X, Mp, Np)
        v, cur = Xp.copy(), "xs[i, j]"
        choices += ["shift"] + (["transpose"] if bM == bN else [])
        params = [tensor("X", (M, N), idt)]
        body = [I + "xs = T.alloc_shared((%d, %d), %r)\n" % (bM, bN, idt),
                I + "y = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
                I + "T.copy(X[by * %d, bx * %d], xs)\n" % (bM, bN)]
    else:
        K = bK
        A, B = vals(rs, (M, K), idt), vals(rs, (K, N), idt)
        v, cur = pad2(A, Mp, K) @ pad2(B, K, Np), "y[i, j]"
        params = [tensor("A", (M, K), idt), tensor("B", (K, N), idt)]
        body = [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, K, idt), I + "B_s = T.alloc_shared((%d, %d), %r)\n" % (K, bN, idt),
                I + "y = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
                I + "T.copy(A[by * %d, 0], A_s)\n" % bM, I + "T.copy(B[0, bx * %d], B_s)\n" % bN,
                I + "T.gemm(A_s, B_s, y, clear_accum=True)\n"]
    ops = R.sample(choices, R.randint(1, 3))
    lines = []
    for o in ops:
        if o == "bcast":
            e, v = "%s * Rv[by * %d + i] + Cv[bx * %d + j]" % (cur, bM, bN), v * rv[gi] + cv[gj]
        elif o == "cond":
            e, v = "T.if_then_else((i + 2 * j) %% 3 == 0, %s, -%s)" % (cur, cur), np.where((li + 2 * lj) % 3 == 0, v, -v)
        elif o == "index":
            e, v = "%s + (i * %d + j) * 0.125" % (cur, bN), v + (li * bN + lj) * 0.125
        elif o == "blockidx":
            e, v = "%s + T.cast((by * %d + i) %% 5 - bx, 'float32')" % (cur, bM), v + ((gi % 5) - bx)
        elif o == "minmax":
            e, v = "T.min(T.max(%s, -0.5), Cv[bx * %d + j] + 0.75)" % (cur, bN), np.minimum(np.maximum(v, -0.5), cv[gj] + 0.75)
        elif o == "shift":  # a neighbour in the tile: reads the shared tile, not y
            e, v = "%s + xs[i, (j + 1) %% %d] * 0.5" % (cur, bN), v + tiles_shift(Xp, nby, bM, nbx, bN) * 0.5
        elif o == "transpose":
            e, v = "%s - xs[j, i]" % cur, v - untile(tiles(Xp, nby, bM, nbx, bN).transpose(0, 1, 3, 2))
        else:  # ifstmt
            lines.append(("if", cur))
            v = np.where(v > 0, v, v * 0.25)
            cur = "y[i, j]"
            continue
        lines.append(("set", e))
        cur = "y[i, j]"
    params += [tensor("Rv", (Mp,), "float32"), tensor("Cv", (Np,), "float32"), tensor("Y", (M, N), odt)]
    store = R.choice(["copy", "guarded"])
    body.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
    for kind, e in lines:
        if kind == "set":
            body.append(J + "y[i, j] = %s\n" % e)
        else:
            body += [J + "if %s > 0:\n" % e, K2 + "y[i, j] = %s\n" % e, J + "else:\n", K2 + "y[i, j] = %s * 0.25\n" % e]
    if store == "copy":
        body.append(I + "T.copy(y, Y[by * %d, bx * %d])\n" % (bM, bN))
    else:
        body.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
        body.append(J + "if by * %d + i < %d and bx * %d + j < %d:\n" % (bM, M, bN, N))
        body.append(K2 + "Y[by * %d + i, bx * %d + j] = y[i, j]\n" % (bM, bN))
    src = kernel_src(name, params, (nbx, nby), threads, body, swizzle)
    p = Prog(name, "parallel", src, dict(source=source, idt=idt, odt=odt, bM=bM, bN=bN, M=M, N=N, ops=ops, store=store, threads=threads,
                                         swizzle=swizzle))
    if source == "tile":
        p.add_in(X, idt)
    else:
        p.add_in(A, idt)
        p.add_in(B, idt)
    p.add_in(rv, "float32")
    p.add_in(cv, "float32")
    ref = npy_io.round_to(npy_io.round_to(v, "float32")[:M, :N], odt)
    p.add_out(ref, odt, (max(TOL[odt][0], 1e-5), max(TOL[odt][1], 1e-5)))
    return p


def tiles_shift(Xp, nby, bM, nbx, bN):
    """Each tile's element (i, (j + 1) % bN)."""
    return untile(np.roll(tiles(Xp, nby, bM, nbx, bN), -1, axis=3))


# ---------------------------------------------------------------- casts among every dtype
CAST_DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8", "uint8", "int32", "float64", "bool"]


def cast_inputs(rs, shape, dt):
    """Values that reach every conversion's edges: fractions, saturation, overflow to inf."""
    if dt in ("int8", "uint8"):
        return int_vals(rs, shape, dt)
    if dt == "bool":
        return rs.randint(0, 2, shape).astype(np.float64)
    if dt == "int32":
        return rs.choice([-1, 1], shape) * np.floor(np.exp2(rs.uniform(0, 30, shape)))
    mags = {"float8_e4m3": 9, "float8_e5m2": 15.5, "float16": 15.9, "bfloat16": 20, "float32": 20}[dt]
    x = rs.choice([-1, 1], shape) * np.exp2(rs.uniform(-8, mags, shape))
    return cast_ref(x, dt)


def gen_cast(R, rs, name):
    src_dt = R.choice([d for d in CAST_DTYPES if d != "float64"])
    chain = [R.choice(CAST_DTYPES) for _ in range(R.randint(1, 3))]
    out_dt = R.choice([d for d in CAST_DTYPES if d != "float64"])
    # an int scale keeps an integer an integer (int8 and uint8 promote to int32; not int32, which could overflow)
    scale = R.choice([None, None, 3.0, 0.5] + ([2] if src_dt != "int32" else [])) if src_dt != "bool" else None
    bM, bN = R.choice([8, 16, 32]), R.choice([16, 32, 64])
    M, N = R.randint(1, 2 * bM + 3), R.randint(1, 2 * bN + 3)
    threads = R.choice([32, 128])
    via = R.choice(["fragment", "direct"])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    X = cast_inputs(rs, (M, N), src_dt)
    e, v, v_dt = "xs[i, j]", X.copy(), src_dt
    if scale is not None:
        e = "%s * %r" % (e, scale)
        if isinstance(scale, float):  # computed in float32, even for a narrow float (rounded only when cast or stored)
            v, v_dt = npy_io.round_to(v * scale, "float32"), "float32" if src_dt in INT_RANGE else src_dt
        else:
            v, v_dt = v * scale, "int32" if src_dt in INT_RANGE else src_dt
    for d in chain:
        e, v, v_dt = "T.cast(%s, %r)" % (e, d), convert(v, v_dt, d), d
    body = [I + "xs = T.alloc_shared((%d, %d), %r)\n" % (bM, bN, src_dt), I + "T.copy(X[by * %d, bx * %d], xs)\n" % (bM, bN)]
    if via == "fragment":
        body += [I + "y = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, out_dt),
                 I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "y[i, j] = %s\n" % e,
                 I + "T.copy(y, Y[by * %d, bx * %d])\n" % (bM, bN)]
    else:
        body += [I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
                 J + "if by * %d + i < %d and bx * %d + j < %d:\n" % (bM, M, bN, N),
                 K2 + "Y[by * %d + i, bx * %d + j] = %s\n" % (bM, bN, e)]
    src = kernel_src(name, [tensor("X", (M, N), src_dt), tensor("Y", (M, N), out_dt)], (nbx, nby), threads, body)
    p = Prog(name, "cast", src, dict(src=src_dt, chain=chain, out=out_dt, scale=scale, bM=bM, bN=bN, M=M, N=N, via=via))
    p.add_in(X, src_dt)
    p.add_out(convert(v, v_dt, out_dt), out_dt, (0, 0))
    return p


def wrap(x, bits):
    """Two's-complement wrap of integer values."""
    m = 1 << bits
    flat = [((int(t) + (m >> 1)) % m) - (m >> 1) for t in np.asarray(x).reshape(-1)]
    return np.array(flat, dtype=np.float64).reshape(np.shape(x))


def convert(v, from_dt, to_dt):
    """The value of a from_dt value converted to to_dt: an integer to a narrower integer wraps, the
    rest as cast_ref."""
    if from_dt in INT_RANGE and to_dt in INT_RANGE:
        return np.mod(v, 256) if to_dt == "uint8" else wrap(v, 8 if to_dt == "int8" else 32 if to_dt == "int32" else 64)
    return cast_ref(v, to_dt)


# ---------------------------------------------------------------- integer operators
INT_TERMS = [  # (source, numpy of a, b, d, s as int64 arrays; d is never 0, s a shift amount from -3 to 35)
    ("a // d", lambda a, b, d, s: a // d),
    ("a % d", lambda a, b, d, s: a % d),
    ("T.truncdiv(a, d)", lambda a, b, d, s: np.sign(a) * np.sign(d) * (np.abs(a) // np.abs(d))),
    ("T.truncmod(a, d)", lambda a, b, d, s: np.sign(a) * (np.abs(a) % np.abs(d))),
    ("a // -3", lambda a, b, d, s: a // -3),
    ("a % 7", lambda a, b, d, s: a % 7),
    ("T.floordiv(b, 4)", lambda a, b, d, s: b // 4),
    ("T.floormod(a, -5)", lambda a, b, d, s: a % -5),
    ("a << s", lambda a, b, d, s: shl32(a, s)),
    ("a >> s", lambda a, b, d, s: np.where((s < 0) | (s >= 32), np.where(a < 0, -1, 0), a >> np.clip(s, 0, 31))),
    ("b << 3", lambda a, b, d, s: shl32(b, 3)),
    ("a >> 2", lambda a, b, d, s: a >> 2),
    ("~a", lambda a, b, d, s: ~a),
    ("a & b", lambda a, b, d, s: a & b),
    ("a | d", lambda a, b, d, s: a | d),
    ("a ^ b", lambda a, b, d, s: a ^ b),
    ("T.max(a, b) - T.min(a, d)", lambda a, b, d, s: np.maximum(a, b) - np.minimum(a, d)),
    ("abs(a) * 3 + b", lambda a, b, d, s: np.abs(a) * 3 + b),
    ("(a * 7 + b) // 4", lambda a, b, d, s: (a * 7 + b) // 4),
    ("T.if_then_else(a % 2 == 0, a, b)", lambda a, b, d, s: np.where(a % 2 == 0, a, b)),
]


def shl32(a, s):
    """int32 a << s as language.md 2.5 defines it: wraps; an amount out of 0..31 shifts every bit out."""
    s = np.broadcast_to(s, np.shape(a))
    shifted = np.array([int(x) << int(k) if 0 <= k < 32 else 0 for x, k in zip(a.reshape(-1), s.reshape(-1))], dtype=object)
    return wrap(shifted, 32).astype(np.int64).reshape(np.shape(a))


def gen_intops(R, rs, name):
    adt = R.choice(["int32", "int8", "uint8"])
    bM, bN = R.choice([4, 8, 16, 32]), R.choice([8, 16, 32, 64])
    M, N = R.randint(1, 2 * bM + 3), R.randint(1, 2 * bN + 3)
    threads = R.choice([32, 64, 128])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    A = int_vals(rs, (M, N), adt, -1000, 1000)
    B = int_vals(rs, (M, N), "int32", -1000, 1000)
    D = int_vals(rs, (M, N), "int32", -20, 20)
    D[D == 0] = 3
    S = int_vals(rs, (M, N), "int32", -3, 35)
    terms = R.sample(INT_TERMS, R.randint(1, 3))
    expr = " ^ ".join("(%s)" % t for t, _ in terms)
    a, b, d, s = (x.astype(np.int64) for x in (A, B, D, S))
    ref = np.zeros_like(a)
    for _, f in terms:
        ref = ref ^ f(a, b, d, s)
    params = [tensor("A", (M, N), adt), tensor("B", (M, N), "int32"), tensor("D", (M, N), "int32"), tensor("S", (M, N), "int32"),
              tensor("Y", (M, N), "int32")]
    body = [I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
            J + "if by * %d + i < %d and bx * %d + j < %d:\n" % (bM, M, bN, N),
            K2 + "a = A[by * %d + i, bx * %d + j]\n" % (bM, bN),
            K2 + "b = B[by * %d + i, bx * %d + j]\n" % (bM, bN),
            K2 + "d = D[by * %d + i, bx * %d + j]\n" % (bM, bN),
            K2 + "s = S[by * %d + i, bx * %d + j]\n" % (bM, bN),
            K2 + "Y[by * %d + i, bx * %d + j] = %s\n" % (bM, bN, expr)]
    src = kernel_src(name, params, (nbx, nby), threads, body)
    p = Prog(name, "intops", src, dict(adt=adt, terms=[t for t, _ in terms], bM=bM, bN=bN, M=M, N=N))
    for x, dt in ((A, adt), (B, "int32"), (D, "int32"), (S, "int32")):
        p.add_in(x, dt)
    p.add_out(wrap(ref, 32), "int32", (0, 0))
    return p


# ---------------------------------------------------------------- reductions along any axis, accumulated over a loop
def reduce_ref(op, x, axis):
    """T.reduce_<op> of x along axis (|int8| is computed in int32, language.md 2.5: no wrap at -128)."""
    if op in ("abssum", "absmax"):
        x = np.abs(x)
    return x.sum(axis=axis) if op in ("sum", "abssum") else x.max(axis=axis) if op in ("max", "absmax") else x.min(axis=axis)


def combine(op, a, b):
    return a + b if op in ("sum", "abssum") else np.maximum(a, b) if op in ("max", "absmax") else np.minimum(a, b)


def gen_reduce_axes(R, rs, name):
    """A 2-D or 3-D tile reduced along any axis (negative ones too), with clear=False across the steps
    of a loop over the tensor, into float32 or integer accumulators."""
    dt = R.choice(["float32", "float16", "bfloat16", "int32", "int8"])
    op = R.choice(["sum", "max", "min", "abssum", "absmax"])
    rank = R.choice([2, 2, 3])
    shape = [R.choice([2, 4, 8, 16, 32]) for _ in range(rank)]
    axis = R.randrange(rank)
    dim = axis - rank if R.random() < 0.3 else axis
    steps = R.randint(1, 4)
    acc_dt = "int32" if dt in ("int32", "int8") else "float32"
    tile_mem = R.choice(["shared", "fragment"])
    threads = R.choice([32, 64, 128])
    blocks = R.randint(1, 3)
    # X holds `steps` tiles along its first axis per block: block b, step k reads tile b * steps + k
    xshape = (blocks * steps * shape[0],) + tuple(shape[1:])
    X = int_vals(rs, xshape, dt, -50, 50) if acc_dt == "int32" else vals(rs, xshape, dt)
    kept = [s for i, s in enumerate(shape) if i != axis]
    first = R.choice(["clear", "fill"])
    init = 0 if acc_dt == "int32" else 0.25
    zeros = ", ".join(["0"] * (rank - 1))
    body = [I + "t = T.alloc_%s(%r, %r)\n" % (tile_mem, tuple(shape), dt),
            I + "r = T.alloc_fragment(%r, %r)\n" % (tuple(kept), acc_dt)]
    if first == "fill":
        body.append(I + "T.fill(r, %r)\n" % init)
    body.append(I + "for k in T.serial(%d):\n" % steps)
    body.append(J + "T.copy(X[(bx * %d + k) * %d, %s], t)\n" % (steps, shape[0], zeros))
    if first == "clear":  # the first step starts from the identity, the others accumulate
        body.append(J + "if k == 0:\n" + K2 + "T.reduce_%s(t, r, dim=%d, clear=True)\n" % (op, dim))
        body.append(J + "else:\n" + K2 + "T.reduce_%s(t, r, dim=%d, clear=False)\n" % (op, dim))
    else:
        body.append(J + "T.reduce_%s(t, r, dim=%d, clear=False)\n" % (op, dim))
    body.append(I + "T.copy(r, O[bx, %s])\n" % zeros)
    oshape = (blocks,) + tuple(kept)
    src = kernel_src(name, [tensor("X", xshape, dt), tensor("O", oshape, acc_dt)], (blocks,), threads, body)
    ref = np.zeros(oshape)
    for b in range(blocks):
        acc = None if first == "clear" else np.full(kept, float(init))
        for k in range(steps):
            t = X[(b * steps + k) * shape[0]:(b * steps + k + 1) * shape[0]]
            part = reduce_ref(op, t, axis)
            acc = part if acc is None else combine(op, acc, part)
        ref[b] = acc
    p = Prog(name, "reduce_axes", src, dict(dt=dt, op=op, shape=shape, dim=dim, steps=steps, first=first, tile=tile_mem, blocks=blocks))
    p.add_in(X, dt)
    p.add_out(ref, acc_dt, (0, 0) if acc_dt == "int32" else (1e-5, 1e-5))
    return p


# ---------------------------------------------------------------- what follows a gemm on its accumulator
def gen_accum(R, rs, name):
    """A gemm (16-bit, or 8-bit into float32 / int32) into an accumulator that lives in registers on
    GPUs, then: reductions along either axis (clear=False), a cast into a fragment of any dtype, or
    atomics of the whole tile into a global of another dtype."""
    kind = R.choice(["f16", "f16", "int8", "fp8"])
    dt = {"f16": R.choice(["float16", "bfloat16"]), "int8": "int8", "fp8": "float8_e4m3"}[kind]
    acc = "int32" if kind == "int8" else "float32"
    bM, bN = R.choice([64, 64, 128]), R.choice([32, 64, 128])
    bK = 32 if kind == "f16" else 64
    threads = R.choice([128, 256]) if bM == 128 else 128
    M, N, K = R.randint(bM // 2, 2 * bM), R.randint(bN // 2, 2 * bN), bK * R.randint(1, 3)
    nbx, nby, nk = cdiv(N, bN), cdiv(M, bM), cdiv(K, bK)
    Mp, Np = nby * bM, nbx * bN
    after = R.choice(["reduce", "cast", "atomic"])
    tB = kind != "f16" or R.random() < 0.5  # 8-bit tensor-core gemms read B as N x K
    A = int_vals(rs, (M, K), "int8", -8, 8) if kind == "int8" else vals(rs, (M, K), dt)
    B = int_vals(rs, (N, K) if tB else (K, N), "int8", -8, 8) if kind == "int8" else vals(rs, (N, K) if tB else (K, N), dt)
    C = pad2(A, Mp, nk * bK) @ pad2(B.T if tB else B, nk * bK, Np)
    params = [tensor("A", (M, K), dt), tensor("B", B.shape, dt)]
    body = [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt),
            I + "B_s = T.alloc_shared(%r, %r)\n" % ((bN, bK) if tB else (bK, bN), dt),
            I + "C_l = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, acc), I + "T.clear(C_l)\n",
            I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (nk, R.choice([1, 2])),
            J + "T.copy(A[by * %d, k * %d], A_s)\n" % (bM, bK),
            J + ("T.copy(B[bx * %d, k * %d], B_s)\n" % (bN, bK) if tB else "T.copy(B[k * %d, bx * %d], B_s)\n" % (bK, bN)),
            J + "T.gemm(A_s, B_s, C_l, transpose_B=%r)\n" % tB]
    p = Prog(name, "accum", "", dict(kind=kind, dt=dt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, tB=tB, after=after, threads=threads))
    p.add_in(A, dt)
    p.add_in(B, dt)
    if after == "reduce":
        op, dim = R.choice(["sum", "max", "min", "absmax"]), R.choice([0, 1])
        n_r = bN if dim == 0 else bM
        init = 0 if acc == "int32" else 0.5
        body += [I + "r = T.alloc_fragment((%d,), %r)\n" % (n_r, acc), I + "T.fill(r, %r)\n" % init,
                 I + "T.reduce_%s(C_l, r, dim=%d, clear=False)\n" % (op, dim)]
        t = tiles(C, nby, bM, nbx, bN)
        red = combine(op, reduce_ref(op, t, 2 + dim), init)  # (nby, nbx, n_r)
        if dim == 1:
            params.append(tensor("O", (nbx, Mp), acc))
            body.append(I + "T.copy(r, O[bx, by * %d])\n" % bM)
            ref = red.transpose(1, 0, 2).reshape(nbx, Mp)
        else:
            params.append(tensor("O", (nby, Np), acc))
            body.append(I + "T.copy(r, O[by, bx * %d])\n" % bN)
            ref = red.reshape(nby, Np)
        p.add_out(ref, acc, (0, 0) if acc == "int32" else (1e-5, 1e-5))
        p.desc.update(op=op, dim=dim)
    elif after == "cast":
        out_dt = R.choice(["float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8", "int32", "float32"])
        params.append(tensor("Y", (M, N), out_dt))
        body += [I + "Y_f = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, out_dt),
                 I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "Y_f[i, j] = T.cast(C_l[i, j], %r)\n" % out_dt,
                 I + "T.copy(Y_f, Y[by * %d, bx * %d])\n" % (bM, bN)]
        p.add_out(convert(C, acc, out_dt)[:M, :N], out_dt, (0, 0))
        p.desc.update(out=out_dt)
    else:
        s_dt = R.choice(["float32", "float16", "bfloat16"]) if acc == "float32" else "int32"
        # every block row adds its tile into one (bM, Np) band: sums of nby exact values
        S0 = np.zeros((bM, Np)) if s_dt == "int32" else rs.randint(-8, 9, (bM, Np)) / 4.0
        params.append(tensor("S", (bM, Np), s_dt))
        body.append(I + "T.atomic_add(S[0, bx * %d], C_l)\n" % bN)
        p.add_in(S0, s_dt, "inout")
        ref = S0 + C.reshape(nby, bM, Np).sum(axis=0)
        p.inout_refs[2] = (ref, s_dt) + {"float32": (1e-5, 1e-5), "int32": (0, 0), "float16": (2e-3, 2e-2), "bfloat16": (1.6e-2, 0.2)}[s_dt]
        p.desc.update(s_dt=s_dt)
    p.src = kernel_src(name, params, (nbx, nby), threads, body)
    return p


# ---------------------------------------------------------------- tile operations on regions
def gen_regions(R, rs, name):
    """Tile operations on slices: a copy with a halo past the tile (clipped at the tensor's edge), a
    stencil over it, T.fill / T.clear of parts, a copy between offset regions, a reduction of part of
    a tile into part of a vector."""
    bM, bN = R.choice([8, 16, 32]), R.choice([8, 16, 32])
    halo = R.choice([1, 2, 4])
    M, N = R.randint(1, 3 * bM + 3), R.randint(1, 3 * bN + 3)
    threads = R.choice([32, 64, 128])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    X = vals(rs, (M, N), "float32")
    Xp = pad2(X, nby * bM + halo, nbx * bN + halo)
    h, w = R.randint(1, bM), R.randint(1, bN)          # the region copied from y into z
    a, c = R.randint(0, bM - h), R.randint(0, bN - w)  # its place in y
    a2, c2 = R.randint(0, bM - h), R.randint(0, bN - w)  # and in z
    f_rows = R.randint(0, bM - 1)                       # y's first rows filled with 1.0
    z_init = R.choice(["clear", "fill"])
    r_rows = R.randint(1, bM)
    body = [I + "s = T.alloc_shared((%d, %d), 'float32')\n" % (bM + halo, bN + halo),
            I + "y = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
            I + "z = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
            I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM,
            I + "T.copy(X[by * %d : by * %d + %d, bx * %d : bx * %d + %d], s)\n" % (bM, bM, bM + halo, bN, bN, bN + halo),
            I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
            J + "y[i, j] = s[i, j] + s[i + %d, j] * 0.5 + s[i, j + %d] * 0.25\n" % (halo, halo)]
    if f_rows:
        body.append(I + "T.fill(y[0:%d, :], 1.0)\n" % f_rows)
    body.append(I + ("T.clear(z)\n" if z_init == "clear" else "T.fill(z, -0.5)\n"))
    body.append(I + "T.copy(y[%d:%d, %d:%d], z[%d:%d, %d:%d])\n" % (a, a + h, c, c + w, a2, a2 + h, c2, c2 + w))
    body.append(I + "T.fill(r, 0.25)\n")
    body.append(I + "T.reduce_sum(y[0:%d, :], r[0:%d], dim=1, clear=False)\n" % (r_rows, r_rows))
    body.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
    body.append(J + "z[i, j] = z[i, j] + r[i]\n")
    body.append(I + "T.copy(z, Y[by * %d, bx * %d])\n" % (bM, bN))
    src = kernel_src(name, [tensor("X", (M, N), "float32"), tensor("Y", (M, N), "float32")], (nbx, nby), threads, body)
    out = np.zeros((nby * bM, nbx * bN))
    for by in range(nby):
        for bx in range(nbx):
            sv = Xp[by * bM:(by + 1) * bM + halo, bx * bN:(bx + 1) * bN + halo]
            y = sv[:bM, :bN] + sv[halo:halo + bM, :bN] * 0.5 + sv[:bM, halo:halo + bN] * 0.25
            y[:f_rows, :] = 1.0
            z = np.full((bM, bN), 0.0 if z_init == "clear" else -0.5)
            z[a2:a2 + h, c2:c2 + w] = y[a:a + h, c:c + w]
            r = np.full(bM, 0.25)
            r[:r_rows] += y[:r_rows].sum(axis=1)
            out[by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN] = z + r[:, None]
    p = Prog(name, "regions", src, dict(bM=bM, bN=bN, M=M, N=N, halo=halo, region=(h, w, a, c, a2, c2), f_rows=f_rows, z_init=z_init,
                                        r_rows=r_rows, threads=threads))
    p.add_in(X, "float32")
    p.add_out(out[:M, :N], "float32", (1e-5, 1e-5))
    return p


# ---------------------------------------------------------------- loops with a dependence between iterations
def gen_scan(R, rs, name):
    """Prefix sums over a tile along either axis, forward or backward (a negative step), with a
    stride; a stepped loop scaling every other row; T.grid, T.unroll and T.vectorized loops."""
    bM, bN = R.choice([4, 8, 16, 32]), R.choice([8, 16, 32])
    M, N = R.randint(1, 3 * bM + 3), R.randint(1, 3 * bN + 3)
    threads = R.choice([32, 64, 128])
    axis, backward, stride = R.choice([0, 1]), R.random() < 0.5, R.choice([1, 1, 2])
    inner = R.choice(["T.Parallel", "T.vectorized", "T.unroll", "T.serial"])
    mem = R.choice(["fragment", "shared"])
    stepped = R.random() < 0.5
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    X = vals(rs, (M, N), "float32")
    t = tiles(pad2(X, nby * bM, nbx * bN), nby, bM, nbx, bN).copy()  # (nby, nbx, bM, bN)
    n_scan, n_other = (bM, bN) if axis == 0 else (bN, bM)
    if backward:
        outer = "T.serial(%d, -1, -1)" % (n_scan - 1 - stride)
        order, nb = range(n_scan - 1 - stride, -1, -1), "k + %d" % stride
    else:
        outer = "T.serial(%d, %d)" % (stride, n_scan)
        order, nb = range(stride, n_scan), "k - %d" % stride
    at = (lambda k, o: "y[%s, %s]" % (k, o)) if axis == 0 else (lambda k, o: "y[%s, %s]" % (o, k))
    body = [I + "y = T.alloc_%s((%d, %d), 'float32')\n" % (mem, bM, bN),
            I + "z = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
            I + "T.copy(X[by * %d, bx * %d], y)\n" % (bM, bN),
            I + "for k in %s:\n" % outer, J + "for o in %s(%d):\n" % (inner, n_other),
            K2 + "%s = %s + %s\n" % (at("k", "o"), at("k", "o"), at(nb, "o"))]
    for k in order:
        src_k = k + stride if backward else k - stride
        if axis == 0:
            t[:, :, k, :] += t[:, :, src_k, :]
        else:
            t[:, :, :, k] += t[:, :, :, src_k]
    if stepped:
        body += [I + "for i in T.serial(1, %d, 2):\n" % bM, J + "for j in T.Parallel(%d):\n" % bN, K2 + "y[i, j] = y[i, j] * 0.5\n"]
        t[:, :, 1::2, :] *= 0.5
    body += [I + "for i, j in T.grid(%d, %d):\n" % (bM, bN), J + "z[i, j] = y[i, j] + T.cast(i - 2 * j, 'float32')\n",
             I + "T.copy(z, Y[by * %d, bx * %d])\n" % (bM, bN)]
    ii, jj = np.meshgrid(np.arange(bM), np.arange(bN), indexing="ij")
    t = t + (ii - 2 * jj)
    src = kernel_src(name, [tensor("X", (M, N), "float32"), tensor("Y", (M, N), "float32")], (nbx, nby), threads, body)
    p = Prog(name, "scan", src, dict(bM=bM, bN=bN, M=M, N=N, axis=axis, backward=backward, stride=stride, inner=inner, mem=mem,
                                     stepped=stepped, threads=threads))
    p.add_in(X, "float32")
    p.add_out(untile(t)[:M, :N], "float32", (1e-6, 1e-6))
    return p


# ---------------------------------------------------------------- atomics
def gen_atomic(R, rs, name):
    """T.atomic_add in its element and tile forms into globals (and into a shared tile many
    iterations hit), with values whose sums are exact in the destination type in any order."""
    dt = R.choice(["float32", "float16", "bfloat16", "int32"])
    form = R.choice(["element", "tile", "shared"])
    bM, bN = R.choice([8, 16, 32]), R.choice([8, 16, 32, 64])
    nby, nbx = R.randint(1, 4), R.randint(1, 3)
    M, N = nby * bM, nbx * bN
    threads = R.choice([32, 64, 128])
    if dt == "int32":
        X = int_vals(rs, (M, N), "int32", -100, 100)
    else:  # quarters: the sums are exact in float32 whatever the order (not always in 16 bits: see the tolerance)
        X = rs.randint(-4, 5, (M, N)) / 4.0
    x_dt = "float32" if dt != "int32" else "int32"
    groups = R.choice([1, 4, 8]) if form == "shared" else 1
    body = [I + "x = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, x_dt),
            I + "T.copy(X[by * %d, bx * %d], x)\n" % (bM, bN)]
    if form == "element":  # every block adds its tile into the same (bM, bN) window of S
        S0 = (int_vals(rs, (bM, bN), "int32", -50, 50) if dt == "int32" else rs.randint(-8, 9, (bM, bN)) / 4.0)
        body += [I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "T.atomic_add(S[i, j], x[i, j])\n"]
        ref = S0 + X.reshape(nby, bM, nbx, bN).sum(axis=(0, 2))
    elif form == "tile":  # each row of blocks adds into its own row band, the columns of blocks collide
        S0 = (int_vals(rs, (M, bN), "int32", -50, 50) if dt == "int32" else rs.randint(-8, 9, (M, bN)) / 4.0)
        body.append(I + "T.atomic_add(S[by * %d, 0], x)\n" % bM)
        ref = S0 + X.reshape(M, nbx, bN).sum(axis=1)
    else:  # a shared accumulator that the whole tile hits, groups of columns each into one slot
        S0 = (int_vals(rs, (groups,), "int32", -50, 50) if dt == "int32" else rs.randint(-8, 9, (groups,)) / 4.0)
        body += [I + "acc = T.alloc_shared((%d,), %r)\n" % (groups, dt), I + "T.clear(acc)\n",
                 I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "T.atomic_add(acc[j %% %d], x[i, j])\n" % groups,
                 I + "for g in T.Parallel(%d):\n" % groups, J + "T.atomic_add(S[g], acc[g])\n"]
        ref = S0 + np.array([X[:, g::groups].sum() for g in range(groups)])
    src = kernel_src(name, [tensor("X", (M, N), x_dt), tensor("S", S0.shape, dt)], (nbx, nby), threads, body)
    p = Prog(name, "atomic", src, dict(dt=dt, form=form, bM=bM, bN=bN, M=M, N=N, groups=groups, threads=threads))
    p.add_in(X, x_dt)
    p.add_in(S0, dt, "inout")
    # the sums are exact in float32 and int32; a narrow float rounds each partial sum, in any order
    tol = {"float32": (0, 1e-6), "int32": (0, 0), "float16": (2e-3, 0.25), "bfloat16": (1.6e-2, 1.0)}[dt]
    p.inout_refs[1] = (ref, dt) + tol
    return p


# ---------------------------------------------------------------- thread-level code
def gen_threads(R, rs, name):
    """Per-thread loops over a row with T.alloc_local / T.alloc_var accumulators, a shared tree
    reduction with barriers, thread-dependent stores; 1-D or 2-D thread blocks. Or without barriers:
    per-thread stores around a block-level in-place update of the same shared row."""
    if R.random() < 0.3:
        return gen_threads_no_barrier(R, rs, name)
    threads = R.choice([32, 64, 128, 256])
    two_d = R.random() < 0.3
    N = R.randint(1, 3 * threads + 7)
    rows = R.randint(1, 5)
    per = R.choice([1, 2, 4])  # local array length: elements a thread keeps per pass
    local = R.choice(["alloc_local", "alloc_var", "scalar"])
    blockop = R.random() < 0.5  # a block-level in-place scale between the per-thread statements: runs once
    X = vals(rs, (rows, N), "float32")
    levels = threads.bit_length() - 1
    tshape = (threads // 4, 4) if two_d else threads
    body = [I + "partial = T.alloc_shared((%d,), 'float32')\n" % threads]
    if two_d:
        body += [I + "tx = T.get_thread_binding(0)\n", I + "ty = T.get_thread_binding(1)\n"]
        tid = "(ty * %d + tx)" % (threads // 4)
    else:
        body.append(I + "tid = T.get_thread_binding()\n")
        tid = "tid"
    chunk = cdiv(N, threads * per)
    if local == "alloc_local":
        body += [I + "acc = T.alloc_local((%d,), 'float32')\n" % per, I + "for q in T.serial(%d):\n" % per, J + "acc[q] = 0.0\n"]
        acc = "acc[q]"
    elif local == "alloc_var":
        body.append(I + "acc = T.alloc_var('float32')\n" + I + "acc = 0.0\n")
        acc = "acc"
    else:
        body.append(I + "acc = 0.0\n")
        acc = "acc"
    body.append(I + "for c in T.serial(%d):\n" % chunk)
    if local == "alloc_local":
        body += [J + "for q in T.serial(%d):\n" % per,
                 K2 + "if (c * %d + %s) * %d + q < %d:\n" % (threads, tid, per, N),
                 K2 + "    acc[q] = acc[q] + X[bx, (c * %d + %s) * %d + q] * X[bx, (c * %d + %s) * %d + q]\n" % (threads, tid, per, threads, tid, per)]
        body += [I + "total = T.alloc_local((1,), 'float32')\n", I + "total[0] = 0.0\n",
                 I + "for q in T.serial(%d):\n" % per, J + "total[0] = total[0] + acc[q]\n",
                 I + "partial[%s] = total[0]\n" % tid]
    else:
        body += [J + "for q in T.serial(%d):\n" % per,
                 K2 + "if (c * %d + %s) * %d + q < %d:\n" % (threads, tid, per, N),
                 K2 + "    %s = %s + X[bx, (c * %d + %s) * %d + q] * X[bx, (c * %d + %s) * %d + q]\n" % (acc, acc, threads, tid, per, threads, tid, per)]
        body.append(I + "partial[%s] = %s\n" % (tid, acc))
    padded = cdiv(N, threads) * threads
    if blockop:
        body += [I + "rowv = T.alloc_fragment((%d,), 'float32')\n" % padded, I + "T.copy(X[bx, 0], rowv)\n",
                 I + "for j in T.Parallel(%d):\n" % padded, J + "rowv[j] = rowv[j] * 2.0\n"]
    body.append(I + "T.sync_threads()\n")
    # a tree over the shared partials; with threads=(x, y) the index is recomputed after each barrier
    body.append(I + "for level in T.unroll(%d):\n" % levels)
    if two_d:
        body.append(J + "if T.get_thread_binding(1) * %d + T.get_thread_binding(0) < (%d >> (level + 1)):\n" % (threads // 4, threads))
        body.append(K2 + "partial[T.get_thread_binding(1) * %d + T.get_thread_binding(0)] = partial[T.get_thread_binding(1) * %d + T.get_thread_binding(0)] + partial[T.get_thread_binding(1) * %d + T.get_thread_binding(0) + (%d >> (level + 1))]\n" % (threads // 4, threads // 4, threads // 4, threads))
    else:
        body.append(J + "if tid < (%d >> (level + 1)):\n" % threads)
        body.append(K2 + "partial[tid] = partial[tid] + partial[tid + (%d >> (level + 1))]\n" % threads)
    body.append(J + "T.sync_threads()\n")
    # every thread scales its share of the row by the row's sum of squares
    body.append(I + "for c in T.serial(%d):\n" % cdiv(N, threads))
    col = "c * %d + %s" % (threads, "(T.get_thread_binding(1) * %d + T.get_thread_binding(0))" % (threads // 4) if two_d else "tid")
    body.append(J + "if %s < %d:\n" % (col, N))
    body.append(K2 + "Y[bx, %s] = X[bx, %s] / (partial[0] + 1.0)%s\n" % (col, col, " + rowv[%s]" % col if blockop else ""))
    src = kernel_src(name, [tensor("X", (rows, N), "float32"), tensor("Y", (rows, N), "float32")], (rows,), tshape, body)
    ss = (X * X).sum(axis=1, keepdims=True)
    p = Prog(name, "threads", src, dict(threads=tshape, N=N, rows=rows, per=per, local=local, blockop=blockop))
    p.add_in(X, "float32")
    p.add_out(X / (ss + 1.0) + (2 * X if blockop else 0), "float32", (1e-5, 1e-6))
    return p


def gen_threads_no_barrier(R, rs, name):
    threads = R.choice([32, 64, 128])
    N = R.randint(1, 2 * threads + 7)
    rows = R.randint(1, 4)
    padded = cdiv(N, threads) * threads
    tid = "T.get_thread_binding()"
    body = [I + "t = T.alloc_shared((%d,), 'float32')\n" % padded,
            I + "for c in T.serial(%d):\n" % (padded // threads), J + "if c * %d + %s < %d:\n" % (threads, tid, N),
            K2 + "t[c * %d + %s] = X[bx, c * %d + %s] * 3.0\n" % (threads, tid, threads, tid),
            J + "else:\n", K2 + "t[c * %d + %s] = 0.0\n" % (threads, tid),
            I + "for j in T.Parallel(%d):\n" % padded, J + "t[j] = t[j] + 1.0\n",
            I + "for c in T.serial(%d):\n" % (padded // threads), J + "if c * %d + %s < %d:\n" % (threads, tid, N),
            K2 + "Y[bx, c * %d + %s] = t[%d - c * %d - %s]\n" % (threads, tid, padded - 1, threads, tid)]  # another thread's
    src = kernel_src(name, [tensor("X", (rows, N), "float32"), tensor("Y", (rows, N), "float32")], (rows,), threads, body)
    X = vals(rs, (rows, N), "float32")
    p = Prog(name, "threads", src, dict(threads=threads, N=N, rows=rows, barrier=False))
    p.add_in(X, "float32")
    p.add_out(pad2(X * 3.0, rows, padded)[:, ::-1][:, :N] + 1.0, "float32", (0, 0))
    return p


# ---------------------------------------------------------------- per-thread and block-level code mixed
class _Mix:
    """The state of one `mixed` program while it is generated: its lines, a NumPy model of every
    block's buffers (float64) and what per-thread code touched in shared memory since the last point
    every thread passed (a T.sync_threads(), or a block-level statement: on the CPU it ends the thread
    loop, on the GPU the compiler puts a barrier before a conflicting access)."""

    def __init__(self, R, nb, bM, bN, T, P, X, V, G, tx_shape):
        self.R, self.nb, self.bM, self.bN, self.T, self.P = R, nb, bM, bN, T, P
        self.W = bM * bN
        self.tid = np.arange(T)
        self.tx_shape = tx_shape  # (x, y) of a 2-D block, or None
        self.st = [dict(X=X[b], V=V[b], G=G[b].copy(), s=None, f=None, r=None, loc=None, v=None) for b in range(nb)]
        self.dirty = set()  # tiles per-thread code wrote (own elements) since the last sync point
        self.dirty_all = set()  # tiles per-thread code wrote whole (every thread all of it)
        self.xread = set()  # tiles per-thread code read (other threads' elements) since then
        self.lines = []

    def sync_point(self):
        self.dirty, self.dirty_all, self.xread = set(), set(), set()

    def need_sync(self, reads_x=(), writes_own=(), touches=()):
        """Whether a per-thread statement reading other threads' elements of reads_x, writing its own
        of writes_own and touching `touches` in any way must wait for the threads at a barrier."""
        bad = any(b in self.dirty or b in self.dirty_all for b in reads_x)
        bad |= any(b in self.xread or b in self.dirty_all for b in writes_own)
        bad |= any(b in self.dirty or b in self.dirty_all or b in self.xread for b in touches)
        return bad


def gen_mixed(R, rs, name):
    """Per-thread statements (T.get_thread_binding in lets, placed first or late, and inline; 1-D
    and 2-D blocks; T.alloc_local / T.alloc_var / mutable scalars; per-thread loops, ifs, lets,
    stores of a thread's own elements of shared tiles and fragments, reads of other threads'
    elements after a barrier, element atomics) interleaved with block-level tile operations (copies,
    T.Parallel over tiles and locals, reductions, fills, the tile atomic, a block store), some under
    a thread-independent loop or if. The reference: a NumPy model of every thread."""
    nb = R.randint(1, 3)
    bM, bN = R.choice([1, 2, 4, 8]), R.choice([4, 8, 16, 24, 32, 48])
    if R.random() < 0.35:
        tx_shape = R.choice([(32, 2), (16, 4), (8, 4), (32, 4), (64, 2), (4, 8)])
        T_ = tx_shape[0] * tx_shape[1]
    else:
        tx_shape, T_ = None, R.choice([32, 64, 128])
    P = R.choice([1, 2, 4])
    X = vals(rs, (nb, bM, bN), "float32")
    V = vals(rs, (nb, T_), "float32")
    G = rs.randint(-8, 9, (nb, bM, bN)) / 4.0
    V2 = vals(rs, (nb, T_ * P), "float32")  # a thread's own part: [t * P, t * P + P)
    H = rs.randint(-8, 9, (nb, T_ * P)) / 4.0
    m = _Mix(R, nb, bM, bN, T_, P, X, V, G, tx_shape)
    for b, st in enumerate(m.st):
        st["V2"], st["H"] = V2[b].reshape(T_, P), H[b].reshape(T_, P).copy()
    W = bM * bN
    binding = R.choice(["first", "first", "late", "inline"])
    derived = R.random() < 0.4  # a let of the linear index computed from the bindings
    x_ = tx_shape[0] if tx_shape else T_
    if tx_shape:
        inline = "(T.get_thread_binding(1) * %d + T.get_thread_binding(0))" % x_
    else:
        inline = R.choice(["T.get_thread_binding()", "T.get_thread_binding(0)"])
    named = {"t": inline}  # the linear thread index's expression now

    def bind(ind):
        if tx_shape:
            m.lines.append(ind + "tx = T.get_thread_binding(0)\n" + ind + "ty = T.get_thread_binding(1)\n")
            t = "(ty * %d + tx)" % x_
        else:
            m.lines.append(ind + "tx = T.get_thread_binding()\n")
            t = "tx"
        if derived:
            m.lines.append(ind + "tid = %s\n" % t)
            t = "tid"
        named["t"] = t

    tids = m.tid
    local = R.choice(["alloc_var", "alloc_var_init", "scalar"])
    ind0 = I
    params = [tensor("X", (nb * bM, bN), "float32"), tensor("V", (nb, T_), "float32"), tensor("V2", (nb, T_ * P), "float32"),
              tensor("G", (nb * bM, bN), "float32"), tensor("H", (nb, T_ * P), "float32"),
              tensor("Y", (nb * bM, bN), "float32"), tensor("F", (nb * bM, bN), "float32"), tensor("Rs", (nb * bM,), "float32"),
              tensor("Z", (nb, T_), "float32"), tensor("W", (nb, T_ * P), "float32")]
    L = m.lines
    if binding == "first":
        bind(ind0)
    L.append(ind0 + "s = T.alloc_shared((%d, %d), 'float32')\n" % (bM, bN))
    L.append(ind0 + "f = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    L.append(ind0 + "r = T.alloc_fragment((%d,), 'float32')\n" % bM)
    L.append(ind0 + "loc = T.alloc_local((%d,), 'float32')\n" % P)
    # the initial values, block-level
    L.append(ind0 + "T.copy(X[bx * %d, 0], s)\n" % bM)
    f_copied = R.random() < 0.5
    L.append(ind0 + ("T.copy(X[bx * %d, 0], f)\n" % bM if f_copied else "T.fill(f, 0.25)\n"))
    L.append(ind0 + "T.fill(r, 1.0)\n")
    loc_init = R.choice(["fill", "parallel", "serial", "clear"])
    L.append(ind0 + {"fill": "T.fill(loc, 0.5)\n", "clear": "T.clear(loc)\n",
                     "parallel": "for q in T.Parallel(%d):\n%s    loc[q] = 0.5 * q\n" % (P, ind0),
                     "serial": "for q in T.serial(%d):\n%s    loc[q] = 0.5 * q\n" % (P, ind0)}[loc_init])
    if local == "alloc_var":
        L.append(ind0 + "v = T.alloc_var('float32')\n" + ind0 + "v = 1.0\n")
    elif local == "alloc_var_init":
        L.append(ind0 + "v = T.alloc_var('float32', init=1.0)\n")
    else:
        L.append(ind0 + "v = 1.0\n")
    for st in m.st:
        st["s"] = st["X"].copy()
        st["f"] = st["X"].copy() if f_copied else np.full((bM, bN), 0.25)
        st["r"] = np.ones(bM)
        st["loc"] = np.tile((np.zeros(P) if loc_init == "clear" else np.full(P, 0.5) if loc_init == "fill" else 0.5 * np.arange(P)), (T_, 1))
        st["v"] = np.ones(T_)
    if binding == "late":
        late_at = R.randint(0, 4)
    nc = cdiv(W, T_)
    lets = [0]
    lets_blk = []  # the names of block-level lets in scope

    # ---- the statements: each appends its lines at `ind` and applies itself to the model of block b
    def own_loop(ind, t, body_fn, guard=True):
        """for c: e = c * T + t; if e < W: body(e) -- the elements a thread owns (e % T == t)."""
        use_let = R.random() < 0.5
        lets[0] += 1
        e = "e%d" % lets[0] if use_let else "(c * %d + %s)" % (T_, t)
        out = [ind + "for c in T.serial(%d):\n" % nc]
        if use_let:
            out.append(ind + "    %s = c * %d + %s\n" % (e, T_, t))
        out.append(ind + "    if %s < %d:\n" % (e, W))
        out.append(ind + "        " + body_fn(e) + "\n")
        return out

    def blk(kind, ind):
        """A block-level statement (lines, model)."""
        if kind == "copy_in":
            dst = R.choice(["f", "s"])
            return [ind + "T.copy(X[bx * %d, 0], %s)\n" % (bM, dst)], lambda st: st.__setitem__(dst, st["X"].copy()), {dst}
        if kind == "copy_sf":
            src, dst = R.choice([("s", "f"), ("f", "s")])
            return [ind + "T.copy(%s, %s)\n" % (src, dst)], lambda st: st.__setitem__(dst, st[src].copy()), {src, dst}
        if kind == "par_fs":
            def mod(st):
                st["f"] = st["f"] * 0.5 + st["s"]
            return [ind + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), ind + "    f[i, j] = f[i, j] * 0.5 + s[i, j]\n"], mod, {"f", "s"}
        if kind == "par_sf":
            def mod(st):
                st["s"] = st["s"] - st["f"][:, ::-1] * 0.25
            return [ind + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), ind + "    s[i, j] = s[i, j] - f[i, %d - j] * 0.25\n" % (bN - 1)], mod, {"f", "s"}
        if kind == "reduce":
            src = R.choice(["f", "s"])
            op = R.choice(["sum", "max", "sum_acc"])
            line = {"sum": "T.reduce_sum(%s, r, dim=1)\n", "max": "T.reduce_max(%s, r, dim=1)\n",
                    "sum_acc": "T.reduce_sum(%s, r, dim=1, clear=False)\n"}[op] % src
            def mod(st):
                x = st[src]
                st["r"] = x.sum(axis=1) if op == "sum" else x.max(axis=1) if op == "max" else st["r"] + x.sum(axis=1)
            return [ind + line], mod, {src, "r"}
        if kind == "bcast":
            def mod(st):
                st["s"] = st["s"] + st["r"][:, None] * 0.125
            return [ind + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), ind + "    s[i, j] = s[i, j] + r[i] * 0.125\n"], mod, {"s", "r"}
        if kind == "fill":
            dst = R.choice(["f", "s"])
            if R.random() < 0.5:
                return [ind + "T.fill(%s, 0.75)\n" % dst], lambda st: st.__setitem__(dst, np.full((bM, bN), 0.75)), {dst}
            return [ind + "T.clear(%s)\n" % dst], lambda st: st.__setitem__(dst, np.zeros((bM, bN))), {dst}
        if kind == "atomic":
            def mod(st):
                st["G"] = st["G"] + st["f"]
            return [ind + "T.atomic_add(G[bx * %d, 0], f)\n" % bM], mod, {"f"}
        if kind == "rows":
            def mod(st):
                st["r"] = st["r"] * 0.5 + st["s"][:, 0]
            return [ind + "for i in T.Parallel(%d):\n" % bM, ind + "    r[i] = r[i] * 0.5 + s[i, 0]\n"], mod, {"r", "s"}
        if kind == "cond":  # a block-level if on an element of the tile its branches write
            b = R.choice(["s", "f"])
            els = R.random() < 0.5
            def mod(st):
                if st[b][0, 0] > -4.0:
                    st[b] = st[b] * 0.5 - 8.0
                elif els:
                    st[b] = np.full((bM, bN), 0.5)
            lines = [ind + "if %s[0, 0] > -4.0:\n" % b, ind + "    for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
                     ind + "        %s[i, j] = %s[i, j] * 0.5 - 8.0\n" % (b, b)]
            if els:
                lines += [ind + "else:\n", ind + "    T.fill(%s, 0.5)\n" % b]
            return lines, mod, {b}
        if kind == "let":  # a block-level let of a tile's element, the tile updated right after
            b = R.choice(["s", "f"])
            i0, j0 = R.randrange(bM), R.randrange(bN)
            name = "m%d" % len(lets_blk)
            lets_blk.append(name)
            def mod(st):
                st[name] = st[b][i0, j0]
                st[b] = st[b] * 0.5 + st[name]
            return [ind + "%s = %s[%d, %d]\n" % (name, b, i0, j0), ind + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
                    ind + "    %s[i, j] = %s[i, j] * 0.5 + %s\n" % (b, b, name)], mod, {b}
        if kind == "store":  # the same store in every thread: one does it
            def mod(st):
                st["s"] = st["s"].copy()
                st["s"][0, 0] = st["f"][bM - 1, bN - 1] + 1.0
            return [ind + "s[0, 0] = f[%d, %d] + 1.0\n" % (bM - 1, bN - 1)], mod, {"s", "f"}
        raise ValueError(kind)

    def thr(kind, ind, t):
        """A per-thread statement: (lines, model, reads_x, writes_own, touches) or None where not possible."""
        if kind == "own_s" or kind == "own_f":
            b = kind[-1]
            lines = own_loop(ind, t, lambda e: "%s[%s // %d, %s %% %d] = %s[%s // %d, %s %% %d] * 2.0 + V[bx, %s]" % (b, e, bN, e, bN, b, e, bN, e, bN, t))
            def mod(st):
                flat = st[b].reshape(-1).copy()
                e = np.arange(W)
                flat = flat * 2.0 + st["V"][e % T_]
                st[b] = flat.reshape(bM, bN)
            return lines, mod, (), (b,), ()
        if kind == "xread_var":
            b = R.choice(["s", "f"])
            k = R.choice([1, 3, 5])
            def mod(st):
                st["v"] = st["v"] + st[b][tids % bM, (tids * k) % bN]
            return [ind + "v = v + %s[%s %% %d, (%s * %d) %% %d]\n" % (b, t, bM, t, k, bN)], mod, (b,), (), ()
        if kind == "xread_loc":
            b = R.choice(["s", "f"])
            def mod(st):
                for q in range(P):
                    st["loc"][:, q] = st["loc"][:, q] + st[b][(tids + q) % bM, (tids * 5 + q) % bN]
            return [ind + "for q in T.serial(%d):\n" % P, ind + "    loc[q] = loc[q] + %s[(%s + q) %% %d, (%s * 5 + q) %% %d]\n" % (b, t, bM, t, bN)], mod, (b,), (), ()
        if kind == "row_loop":
            def mod(st):
                for j in range(bN):
                    st["v"] = st["v"] + st["r"][(tids + j) % bM] * 0.5
            return [ind + "for j in T.serial(%d):\n" % bN, ind + "    v = v + r[(%s + j) %% %d] * 0.5\n" % (t, bM)], mod, ("r",), (), ()
        if kind == "if_var":
            k = R.choice([2, 3])
            def mod(st):
                st["v"] = np.where(tids % k == 1, st["v"] * 2.0, st["v"] - 1.0)
                st["loc"][:, 0] = np.where(tids % k == 1, st["loc"][:, 0], st["loc"][:, 0] + 0.25)
            return [ind + "if %s %% %d == 1:\n" % (t, k), ind + "    v = v * 2.0\n", ind + "else:\n", ind + "    v = v - 1.0\n", ind + "    loc[0] = loc[0] + 0.25\n"], mod, (), (), ()
        if kind == "dep_loop":
            k = R.choice([3, 4])
            def mod(st):
                st["v"] = st["v"] + 0.5 * (tids % k)
            return [ind + "for q in T.serial(%s %% %d):\n" % (t, k), ind + "    v = v + 0.5\n"], mod, (), (), ()
        if kind == "loc_mix":
            def mod(st):
                for q in range(P):
                    st["loc"][:, q] = st["loc"][:, q] * 0.5 + st["V"] + q
            return [ind + "for q in T.serial(%d):\n" % P, ind + "    loc[q] = loc[q] * 0.5 + V[bx, %s] + q\n" % t], mod, (), (), ()
        if kind == "atomic_elem":
            def mod(st):
                np.add.at(st["G"], (tids % bM, tids % bN), 1.0)
            return [ind + "T.atomic_add(G[bx * %d + %s %% %d, %s %% %d], 1.0)\n" % (bM, t, bM, t, bN)], mod, (), (), ()
        if kind == "own_r":
            def mod(st):
                st["r"] = st["r"] + st["v"][:bM]
            return [ind + "if %s < %d:\n" % (t, bM), ind + "    r[%s] = r[%s] + v\n" % (t, t)], mod, (), ("r",), ()
        if kind == "par_local":  # a parallel loop that writes locals only: each thread's whole loop
            def mod(st):
                st["loc"] = st["loc"] * 0.5 + 1.0
            return [ind + "for q in T.Parallel(%d):\n" % P, ind + "    loc[q] = loc[q] * 0.5 + 1.0\n"], mod, (), (), ()
        if kind == "fill_local":
            def mod(st):
                st["loc"] = np.full((T_, P), 0.5)
            return [ind + "T.fill(loc, 0.5)\n"], mod, (), (), ()
        if kind == "var_from_loc":
            def mod(st):
                st["v"] = st["v"] + st["loc"].sum(axis=1)
            return [ind + "for q in T.serial(%d):\n" % P, ind + "    v = v + loc[q]\n"], mod, (), (), ()
        if kind == "own_in":  # tile ops on the thread's own part of a global row: per-thread code
            form = R.choice(["copy", "parallel"])
            def mod(st):
                st["loc"] = st["V2"].copy() if form == "copy" else st["loc"] + st["V2"]
            if form == "copy":
                return [ind + "T.copy(V2[bx, %s * %d], loc)\n" % (t, P)], mod, (), (), ()
            return [ind + "for q in T.Parallel(%d):\n" % P, ind + "    loc[q] = loc[q] + V2[bx, %s * %d + q]\n" % (t, P)], mod, (), (), ()
        if kind == "own_atomic":
            def mod(st):
                st["H"] = st["H"] + st["loc"]
            return [ind + "T.atomic_add(H[bx, %s * %d], loc)\n" % (t, P)], mod, (), (), ()
        if kind == "use_let":  # a block-level let's value read by every thread
            name = R.choice(lets_blk)
            def mod(st):
                st["v"] = st["v"] + st[name]
            return [ind + "v = v + %s\n" % name], mod, (), (), ()
        if kind == "guarded_copy":  # a tile copy under a per-thread condition: those threads each copy the whole tile
            k = R.randint(1, T_)
            def mod(st):
                st["f"] = st["X"].copy()
            return [ind + "if %s < %d:\n" % (t, k), ind + "    T.copy(X[bx * %d, 0], f)\n" % bM], mod, (), (), ("f",)
        raise ValueError(kind)

    BLK = ["copy_in", "copy_sf", "par_fs", "par_sf", "reduce", "bcast", "fill", "atomic", "rows", "store", "cond"]
    THR = ["own_s", "own_f", "xread_var", "xread_loc", "row_loop", "if_var", "dep_loop", "loc_mix", "atomic_elem", "own_r",
           "par_local", "fill_local", "var_from_loc", "guarded_copy", "own_in", "own_atomic"]

    def emit(kind, ind, states, is_blk):
        """Appends one statement, with the barrier it needs before it; applies it to `states` (none:
        returns the model)."""
        if is_blk:
            lines, mod, _ = blk(kind, ind)
            L.extend(lines)
            m.sync_point()
        else:
            lines, mod, rx, wo, tt = thr(kind, ind, named["t"])
            if m.need_sync(rx, wo, tt):
                L.append(ind + "T.sync_threads()\n")
                m.sync_point()
            L.extend(lines)
            m.dirty |= set(wo)
            m.xread |= set(rx)
            if kind == "guarded_copy":
                m.dirty_all |= {"f"}
        for st in states:
            mod(st)
        return mod

    def random_stmt(ind, states):
        if R.random() < 0.45:
            emit(R.choice(BLK + ["cond", "let"]), ind, states, True)  # (a let's scope: the rest of the kernel)
        else:
            emit(R.choice(THR + ["use_let"] * bool(lets_blk)), ind, states, False)

    n = R.randint(5, 12)
    desc_wraps = []
    for k in range(n):
        if binding == "late" and k == late_at:
            bind(ind0)
        w = R.random()
        if w < 0.12:  # a thread-independent loop around a few statements
            reps = R.randint(2, 3)
            L.append(ind0 + "for k in T.serial(%d):\n" % reps)
            recorded = [(R.choice(BLK if is_blk else THR), is_blk) for is_blk in (R.random() < 0.45 for _ in range(R.randint(2, 3)))]
            # each statement built once (its lines), its model run reps times
            mods = [emit(kind, J, [], is_blk) for kind, is_blk in recorded]
            # the next iteration follows: whatever per-thread code left pending waits at a barrier
            if m.dirty or m.xread or m.dirty_all:
                L.append(J + "T.sync_threads()\n")
                m.sync_point()
            for _ in range(reps):
                for st in m.st:
                    for mod in mods:
                        mod(st)
            desc_wraps.append("loop%d:%s" % (reps, "+".join(k for k, _ in recorded)))
        elif w < 0.2 and nb > 1:  # a thread-independent if (the odd blocks skip it: they meet before it)
            if m.dirty or m.xread or m.dirty_all:
                L.append(ind0 + "T.sync_threads()\n")
                m.sync_point()
            L.append(ind0 + "if bx % 2 == 0:\n")
            kind_blk = R.random() < 0.5
            kind = R.choice(BLK if kind_blk else THR)
            emit(kind, J, [st for b, st in enumerate(m.st) if b % 2 == 0], kind_blk)
            desc_wraps.append("if:" + kind)
        else:
            random_stmt(ind0, m.st)
    if binding == "late" and late_at >= n:
        bind(ind0)
    t = named["t"]
    # the outputs: the tiles by block-level copies, each thread's values by itself
    L.append(ind0 + "T.copy(s, Y[bx * %d, 0])\n" % bM)
    L.append(ind0 + "T.copy(f, F[bx * %d, 0])\n" % bM)
    L.append(ind0 + "T.copy(r, Rs[bx * %d])\n" % bM)
    L.append(ind0 + "Z[bx, %s] = v + loc[0] * 2.0 + loc[%d]\n" % (t, P - 1))
    w_form = R.choice(["copy", "parallel"])  # each thread's locals to its own part of W
    if w_form == "copy":
        L.append(ind0 + "T.copy(loc, W[bx, %s * %d])\n" % (t, P))
    else:
        L += [ind0 + "for q in T.Parallel(%d):\n" % P, ind0 + "    W[bx, %s * %d + q] = loc[q] * 2.0\n" % (t, P)]
    grid = (nb,)
    src = kernel_src(name, params, grid, tx_shape if tx_shape else T_, L)
    p = Prog(name, "mixed", src, dict(nb=nb, bM=bM, bN=bN, threads=tx_shape or T_, P=P, local=local, binding=binding, derived=derived,
                                      loc_init=loc_init, n=n, wraps=desc_wraps, w_form=w_form))
    p.add_in(X.reshape(nb * bM, bN), "float32")
    p.add_in(V, "float32")
    p.add_in(V2, "float32")
    gi = p.add_in(G.reshape(nb * bM, bN), "float32", "inout")
    hi = p.add_in(H, "float32", "inout")
    big = max(1.0, max(float(np.abs(st[k]).max()) for st in m.st for k in ("s", "f", "r", "v", "loc", "G", "H")))
    tol = (1e-5, 4e-6 * big)  # float32 sums in any order
    p.add_out(np.concatenate([st["s"] for st in m.st]), "float32", tol)
    p.add_out(np.concatenate([st["f"] for st in m.st]), "float32", tol)
    p.add_out(np.concatenate([st["r"] for st in m.st]), "float32", tol)
    p.add_out(np.stack([st["v"] + st["loc"][:, 0] * 2.0 + st["loc"][:, P - 1] for st in m.st]), "float32", tol)
    p.add_out(np.stack([(st["loc"] * (1.0 if w_form == "copy" else 2.0)).reshape(-1) for st in m.st]), "float32", tol)
    p.inout_refs[gi] = (np.concatenate([st["G"] for st in m.st]), "float32") + tol
    p.inout_refs[hi] = (np.stack([st["H"].reshape(-1) for st in m.st]), "float32") + tol
    return p


def gen_mixed_gemm(R, rs, name):
    """A gemm into a register accumulator with per-thread code around it: the thread binding a let
    first (1-D or 2-D block) or inline, a per-thread read of the A stage tile inside the pipelined
    loop, a row reduction and a scale of the accumulator, per-thread reads of the reduced rows (and of
    the accumulator, which then leaves the registers), per-thread element atomics and stores."""
    dt = R.choice(["float16", "bfloat16"])
    bM, bN, bK = 64, R.choice([32, 64, 128]), R.choice([32, 64])
    threads = R.choice([128, 128, (32, 4), (64, 2)])
    T_ = threads if isinstance(threads, int) else threads[0] * threads[1]
    M, N, K = R.randint(bM // 2, 3 * bM), 8 * R.randint(max(1, bN // 16), 3 * bN // 8), 8 * R.randint(2, 3 * bK // 8)
    nby, nbx, nk = cdiv(M, bM), cdiv(N, bN), cdiv(K, bK)
    stages = R.choice([1, 2, 3])
    binding = R.choice(["first", "first", "inline"])
    in_loop = R.random() < 0.5    # a per-thread read of the A tile in each iteration
    acc_read = R.random() < 0.3   # a per-thread read of the accumulator
    red = R.choice(["sum", "max"])
    scale = R.random() < 0.5
    atomic = R.random() < 0.5
    A, B = vals(rs, (M, K), dt), vals(rs, (K, N), dt)
    x_ = threads if isinstance(threads, int) else threads[0]
    L = []
    if binding == "first":
        if isinstance(threads, int):
            L.append(I + "tx = T.get_thread_binding()\n")
            t = "tx"
        else:
            L.append(I + "tx = T.get_thread_binding(0)\n" + I + "ty = T.get_thread_binding(1)\n")
            t = "(ty * %d + tx)" % x_
    else:
        t = "T.get_thread_binding()" if isinstance(threads, int) else "(T.get_thread_binding(1) * %d + T.get_thread_binding(0))" % x_
    L += [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt), I + "B_s = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt),
          I + "C_l = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN), I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM,
          I + "v = T.alloc_var('float32')\n", I + "v = 0.0\n", I + "T.clear(C_l)\n",
          I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (nk, stages),
          J + "T.copy(A[by * %d, k * %d], A_s)\n" % (bM, bK), J + "T.copy(B[k * %d, bx * %d], B_s)\n" % (bK, bN),
          J + "T.gemm(A_s, B_s, C_l)\n"]
    tid = np.arange(T_)
    Ap, Bp = pad2(A, nby * bM, nk * bK), pad2(B, nk * bK, nbx * bN)
    C = Ap @ Bp  # (nby*bM, nbx*bN)
    v = np.zeros((nby, nbx, T_))
    if in_loop:
        L.append(J + "v = v + T.cast(A_s[%s %% %d, (%s + k) %% %d], 'float32')\n" % (t, bM, t, bK))
        for by in range(nby):
            for k in range(nk):
                v[by] += Ap[by * bM + tid % bM, k * bK + (tid + k) % bK][None, :]
    Ct = tiles(C, nby, bM, nbx, bN)  # (nby, nbx, bM, bN)
    if scale:
        L += [I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "C_l[i, j] = C_l[i, j] * 0.5 + 0.25\n"]
        Ct = Ct * 0.5 + 0.25
    L.append(I + "T.reduce_%s(C_l, r, dim=1)\n" % red)
    rr = Ct.sum(axis=3) if red == "sum" else Ct.max(axis=3)  # (nby, nbx, bM)
    L += [I + "for c in T.serial(%d):\n" % cdiv(bM, T_), J + "if c * %d + %s < %d:\n" % (T_, t, bM),
          K2 + "v = v + r[c * %d + %s]\n" % (T_, t)]
    for c in range(cdiv(bM, T_)):
        rows = c * T_ + tid
        ok = rows < bM
        v[:, :, ok] += rr[:, :, rows[ok]]
    if acc_read:
        L.append(I + "v = v + C_l[%s %% %d, (%s * 3) %% %d]\n" % (t, bM, t, bN))
        v += Ct[:, :, tid % bM, (tid * 3) % bN]
    L.append(I + "T.copy(C_l, C[by * %d, bx * %d])\n" % (bM, bN))
    L.append(I + "Z[by, bx, %s] = v\n" % t)
    params = [tensor("A", (M, K), dt), tensor("B", (K, N), dt)] + [tensor("S", (4,), "float32")] * atomic + \
        [tensor("C", (M, N), "float32"), tensor("Z", (nby, nbx, T_), "float32")]
    if atomic:
        L.append(I + "T.atomic_add(S[%s %% 4], v)\n" % t)
    src = kernel_src(name, params, (nbx, nby), threads, L)
    p = Prog(name, "mixed_gemm", src, dict(dt=dt, bM=bM, bN=bN, bK=bK, threads=threads, M=M, N=N, K=K, stages=stages, binding=binding,
                                           in_loop=in_loop, acc_read=acc_read, red=red, scale=scale, atomic=atomic))
    p.add_in(A, dt)
    p.add_in(B, dt)
    if atomic:  # the threads' v summed into 4 slots, in any order
        S0 = rs.randint(-8, 9, (4,)) / 4.0
        si = p.add_in(S0, "float32", "inout")
        p.inout_refs[si] = (S0 + np.array([v[:, :, tid % 4 == g].sum() for g in range(4)]), "float32", 1e-5, 1e-3)
    tol = (1e-5, 1e-4)
    p.add_out(untile(Ct)[:M, :N], "float32", tol)
    p.add_out(v, "float32", tol)
    return p


# ---------------------------------------------------------------- symbolic shapes
def gen_symbolic(R, rs, name):
    """Tensors with T.symbolic sizes (not multiples of the tiles): the grid from T.ceildiv of them,
    clipped copies, a gemm or a row scale, guarded stores of a row sum."""
    dt = R.choice(["float16", "bfloat16", "float32"])
    kind = R.choice(["gemm", "rows"]) if dt != "float32" else "rows"
    bM, bN = R.choice([16, 32, 64]), R.choice([16, 32, 64])
    bK = R.choice([16, 32])
    M, N = R.randint(1, 3 * bM + 5), R.randint(1, 3 * bN + 5)
    Kd = R.choice([16, 32, 48, 64])
    threads = 128
    swizzle = R.choice([0, 2])
    sym_n = R.random() < 0.5
    Nn = "N" if sym_n else str(N)
    decl = "M = T.symbolic('M')\n" + ("N = T.symbolic('N')\n" if sym_n else "")
    if kind == "gemm":
        params = [tensor("A", ("M", Kd), dt), tensor("B", (Kd, Nn), dt), tensor("C", ("M", Nn), "float32")]
        body = [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt), I + "B_s = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt),
                I + "C_l = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN), I + "T.clear(C_l)\n",
                I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (cdiv(Kd, bK), R.choice([0, 2])),
                J + "T.copy(A[by * %d, k * %d], A_s)\n" % (bM, bK), J + "T.copy(B[k * %d, bx * %d], B_s)\n" % (bK, bN),
                J + "T.gemm(A_s, B_s, C_l)\n", I + "T.copy(C_l, C[by * %d, bx * %d])\n" % (bM, bN)]
        A, B = vals(rs, (M, Kd), dt), vals(rs, (Kd, N), dt)
        ins, refs = [(A, dt), (B, dt)], [(A @ B, "float32", TOL["float32"])]
    else:
        params = [tensor("X", ("M", Nn), dt), tensor("R", ("M",), "float32"), tensor("Y", ("M", Nn), dt)]
        body = [I + "x = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
                I + "T.copy(X[by * %d, bx * %d], x)\n" % (bM, bN),
                I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN),
                J + "x[i, j] = T.if_then_else(bx * %d + j < %s, x[i, j] * 2.0 + 1.0, 0.0)\n" % (bN, Nn),
                I + "T.copy(x, Y[by * %d, bx * %d])\n" % (bM, bN),
                I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM,
                I + "T.reduce_sum(x, r, dim=1)\n",
                I + "for i in T.Parallel(%d):\n" % bM,
                J + "if by * %d + i < M:\n" % bM,
                K2 + "T.atomic_add(R[by * %d + i], r[i])\n" % bM]
        X = vals(rs, (M, N), dt)
        Y = X * 2.0 + 1.0
        R0 = vals(rs, (M,), "float32")
        ins, refs = [(X, dt)], [(npy_io.round_to(Y, dt), dt, TOL[dt])]
    src = kernel_src(name, params, ("T.ceildiv(%s, %d)" % (Nn, bN), "T.ceildiv(M, %d)" % bM), threads, body, swizzle)
    src = src.replace("@T.prim_func", decl + "\n@T.prim_func", 1)
    p = Prog(name, "symbolic", src, dict(kind=kind, dt=dt, bM=bM, bN=bN, M=M, N=N, sym_n=sym_n, swizzle=swizzle))
    for x, d in ins:
        p.add_in(x, d)
    if kind == "rows":
        p.add_in(R0, "float32", "inout")
        p.inout_refs[1] = (R0 + Y.sum(axis=1), "float32", 1e-5, 1e-4)
    for ref, d, tol in refs:
        p.add_out(ref, d, tol)
    return p


# ---------------------------------------------------------------- pipelined loops with per-thread code; several launches
def _pipes(R, rs, name, family):
    """A gemm kernel whose K loop is one T.Pipelined loop, two in sequence (K split between them, own
    or shared stage tiles) or one nested in a serial loop (starting at the outer variable), with
    per-thread code in the loop bodies (a let of the stage tile, element stores to a shared tile, a
    barrier, reads of the neighbour's element, T.atomic_add into a shared tile); loop ends constant,
    symbolic (T.symbolic K), causal (T.min(by + 1, nk)) or ragged (nk - bx % 2); an epilogue that
    scales and row-reduces the accumulator, reads the reduced rows per thread, may store one element
    of the accumulator per thread, copies it out, then overwrites the tile's first row per thread.
    `launches`: a first launch writes the slots the gemm kernel's threads atomically add to, and a
    third one reads the gemm's output C back through its own pipelined loop (row sums, ragged)."""
    launches = family == "launches"
    dt = R.choice(["float16", "bfloat16"])
    bM, bN, bK = 64, R.choice([32, 64, 128]), R.choice([32, 64])
    threads = R.choice([128, 128, 256, (32, 4)])
    T_ = threads if isinstance(threads, int) else threads[0] * threads[1]
    M, N, K = R.randint(bM // 2, 3 * bM), 8 * R.randint(max(1, bN // 16), 3 * bN // 8), 8 * R.randint(2, 3 * bK // 8 + 4)
    nby, nbx, nk = cdiv(M, bM), cdiv(N, bN), cdiv(K, bK)
    loops = R.choice(["one", "seq", "nested"]) if not launches else R.choice(["one", "one", "seq"])
    ext = R.choice(["const", "const", "sym", "causal", "tail"]) if launches else R.choice(["const", "const", "sym", "tail"])
    binding = R.choice(["first", "first", "inline"])
    if binding == "first":
        pre = [I + "tx = T.get_thread_binding()\n"] if isinstance(threads, int) else \
            [I + "tx = T.get_thread_binding(0)\n", I + "ty = T.get_thread_binding(1)\n"]
        t = "tx" if isinstance(threads, int) else "(ty * %d + tx)" % threads[0]
    else:
        pre = []
        t = "T.get_thread_binding()" if isinstance(threads, int) else "(T.get_thread_binding(1) * %d + T.get_thread_binding(0))" % threads[0]
    end_expr = {"const": "%d" % nk, "sym": "T.ceildiv(K, %d)" % bK, "causal": "T.min(by + 1, %d)" % nk, "tail": "%d - bx %% 2" % nk}[ext]
    end_of = {"const": lambda by, bx: nk, "sym": lambda by, bx: nk, "causal": lambda by, bx: min(by + 1, nk),
              "tail": lambda by, bx: nk - bx % 2}[ext]
    pt_store, pt_atomic = R.random() < 0.6, R.random() < 0.5
    pt_read = R.random() < 0.5 or not (pt_store or pt_atomic)
    h_init = R.choice(["fill", "thread", "thread_sync"])
    h_out = R.choice(["copy", "read"])
    scale, red, acc_read, frag_store, overwrite = R.random() < 0.5, R.choice([None, "sum", "max"]), R.random() < 0.3, \
        R.random() < 0.25, R.random() < 0.5
    glob_atomic = launches or R.random() < 0.3
    pre_kernel = launches and R.random() < 0.8
    post = launches
    T2 = 0
    Kd = "K" if ext == "sym" else K
    params_in = [tensor("A", (M, Kd), dt), tensor("B", (Kd, N), dt)]
    A, B = vals(rs, (M, K), dt), vals(rs, (K, N), dt)
    Ap, Bp = pad2(A, nby * bM, (nk + 1) * bK), pad2(B, (nk + 1) * bK, nbx * bN)
    S0 = rs.randint(-8, 9, (4,)) / 4.0
    # the loops: (indent, start expr, start(r), end expr, tiles, stages, per-thread code?), the outer serial loop's count
    L = pre + [I + "A_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt), I + "B_s = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt),
               I + "C_l = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN), I + "v = T.alloc_var('float32')\n", I + "v = 0.0\n"]
    if pt_store:
        L.append(I + "W_s = T.alloc_shared((%d,), 'float32')\n" % T_)
    if pt_atomic:
        L.append(I + "H_s = T.alloc_shared((16,), 'float32')\n")
    if red:
        L.append(I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM)
    L.append(I + "T.clear(C_l)\n")
    if pt_atomic:
        if h_init == "fill":
            L.append(I + "T.fill(H_s, 0.0)\n")
        else:
            L += [I + "if %s < 16:\n" % t, J + "H_s[%s] = 0.0\n" % t]
            if h_init == "thread_sync":
                L.append(I + "T.sync_threads()\n")
    h = R.randint(0, nk)
    if loops == "one":
        specs = [(I, "0", "%s" % end_expr, lambda r, by, bx: range(0, end_of(by, bx)), ("A_s", "B_s"))]
        outer = 1
    elif loops == "seq":
        own = R.random() < 0.5
        if own:
            L += [I + "A2_s = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt), I + "B2_s = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt)]
        specs = [(I, "0", "%d" % h, lambda r, by, bx: range(0, h), ("A_s", "B_s")),
                 (I, "%d" % h, end_expr, lambda r, by, bx: range(h, end_of(by, bx)), ("A2_s", "B2_s") if own else ("A_s", "B_s"))]
        outer = 1
    else:
        outer = R.choice([2, 3])
        L.append(I + "for ro in T.serial(%d):\n" % outer)
        specs = [(J, "ro", end_expr, lambda r, by, bx: range(r, end_of(by, bx)), ("A_s", "B_s"))]
    loop_desc = []
    for li, (ind, start, end, ks, (a_s, b_s)) in enumerate(specs):
        stages = R.choice([0, 1, 2, 3])
        has_pt = R.random() < 0.8
        gemm_first = R.random() < 0.5
        end_sync = R.random() < 0.4
        loop_desc.append(dict(stages=stages, pt=has_pt, gemm_first=gemm_first, end_sync=end_sync))
        kk = "k%d" % li
        b = ind + "    "
        rng = end if start == "0" else "%s, %s" % (start, end)
        L.append(ind + "for %s in T.Pipelined(%s, num_stages=%d):\n" % (kk, rng, stages))
        L += [b + "T.copy(A[by * %d, %s * %d], %s)\n" % (bM, kk, bK, a_s), b + "T.copy(B[%s * %d, bx * %d], %s)\n" % (kk, bK, bN, b_s)]
        gemm = [b + "T.gemm(%s, %s, C_l)\n" % (a_s, b_s)]
        ptl = []
        if has_pt:
            a = "a%d" % li
            ptl.append(b + "%s = T.cast(%s[%s %% %d, (%s + %s) %% %d], 'float32')\n" % (a, a_s, t, bM, t, kk, bK))
            if pt_read:
                ptl.append(b + "v = v + %s\n" % a)
            if pt_store:
                ptl += [b + "W_s[%s] = %s * 2.0 + T.cast(%s, 'float32')\n" % (t, a, kk), b + "T.sync_threads()\n",
                        b + "v = v + W_s[(%s + 1) %% %d]\n" % (t, T_)]
            if pt_atomic:
                ptl.append(b + "T.atomic_add(H_s[%s %% 16], %s)\n" % (t, a))
            if end_sync:
                ptl.append(b + "T.sync_threads()\n")
        L += gemm + ptl if gemm_first else ptl + gemm
    # the model: every block's accumulator tile, v per thread, H_s
    tid = np.arange(T_)
    Ct = np.zeros((nby, nbx, bM, bN))
    v = np.zeros((nby, nbx, T_))
    H = np.zeros((nby, nbx, 16))
    for by in range(nby):
        for bx in range(nbx):
            rows = slice(by * bM, (by + 1) * bM)
            for r in range(outer):
                for li, (ind, start, end, ks, _) in enumerate(specs):
                    for k in ks(r, by, bx):
                        Ct[by, bx] += Ap[rows, k * bK:(k + 1) * bK] @ Bp[k * bK:(k + 1) * bK, bx * bN:(bx + 1) * bN]
                        if not loop_desc[li]["pt"]:
                            continue
                        a = Ap[by * bM + tid % bM, k * bK + (tid + k) % bK]
                        if pt_read:
                            v[by, bx] += a
                        if pt_store:
                            v[by, bx] += np.roll(a * 2.0 + k, -1)
                        if pt_atomic:
                            np.add.at(H[by, bx], tid % 16, a)
    if pt_atomic:
        if h_out == "copy":
            L.append(I + "T.copy(H_s, H[by, bx, 0])\n")
        else:
            L += [I + "T.sync_threads()\n", I + "v = v + H_s[%s %% 16]\n" % t]
            v += H[:, :, tid % 16]
    if scale:
        L += [I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN), J + "C_l[i, j] = C_l[i, j] * 0.5 + 0.25\n"]
        Ct = Ct * 0.5 + 0.25
    if red:
        L += [I + "T.reduce_%s(C_l, r, dim=1)\n" % red, I + "v = v + r[%s %% %d]\n" % (t, bM)]
        rr = Ct.sum(axis=3) if red == "sum" else Ct.max(axis=3)
        v += rr[:, :, tid % bM]
    if acc_read:
        L.append(I + "v = v + C_l[%s %% %d, (%s * 3) %% %d]\n" % (t, bM, t, bN))
        v += Ct[:, :, tid % bM, (tid * 3) % bN]
    if frag_store:  # each thread's own element of the accumulator (distinct: T_ <= bM * bN)
        if acc_read:  # another thread may still read the element this one writes
            L.append(I + "T.sync_threads()\n")
        L.append(I + "C_l[%s %% %d, (%s // %d) %% %d] = v\n" % (t, bM, t, bM, bN))
        Ct[:, :, tid % bM, (tid // bM) % bN] = v
    L.append(I + "T.copy(C_l, C[by * %d, bx * %d])\n" % (bM, bN))
    Cf = untile(Ct)[:M, :N].copy()
    if overwrite:  # per-thread stores over the tile's first row, after the block's copy wrote it
        L += [I + "if %s < %d:\n" % (t, bN), J + "if bx * %d + %s < %d:\n" % (bN, t, N), K2 + "C[by * %d, bx * %d + %s] = v\n" % (bM, bN, t)]
        for by in range(nby):
            for bx in range(nbx):
                n = min(bN, N - bx * bN)
                Cf[by * bM, bx * bN:bx * bN + n] = v[by, bx, :n]
    L.append(I + "Z[by, bx, %s] = v\n" % t)
    if glob_atomic:
        L.append(I + "T.atomic_add(S[%s %% 4], v)\n" % t)
    # launches around it
    head = []
    if pre_kernel:  # S from S0, by a launch of its own; the gemm launch adds to it
        if R.random() < 0.5:
            head = ["    with T.Kernel(1, threads=32) as b0:\n", I + "t0 = T.get_thread_binding()\n", I + "if t0 < 4:\n",
                    J + "S[t0] = S0[t0] * 2.0\n"]
        else:
            head = ["    with T.Kernel(1, threads=32) as b0:\n", I + "for i in T.Parallel(4):\n", J + "S[i] = S0[i] * 2.0\n"]
    tail = []
    if post:  # row sums of C by a third launch, through its own pipelined loop; ragged or not
        bN2 = R.choice([16, 32, 64])
        nb2 = cdiv(N, bN2)
        T2 = R.choice([64, 128])
        ext2 = R.choice(["const", "tail"])
        e2 = "%d" % nb2 if ext2 == "const" else "%d - b2 %% 2" % nb2
        s2 = R.choice([0, 2, 3])
        tail = ["    with T.Kernel(%d, threads=%d) as b2:\n" % (nby, T2), I + "t2 = T.get_thread_binding()\n",
                I + "X_s = T.alloc_shared((%d, %d), 'float32')\n" % (bM, bN2), I + "rs = T.alloc_fragment((%d,), 'float32')\n" % bM,
                I + "u = T.alloc_var('float32')\n", I + "u = 0.0\n", I + "T.fill(rs, 0.0)\n",
                I + "for k2 in T.Pipelined(%s, num_stages=%d):\n" % (e2, s2),
                J + "T.copy(C[b2 * %d, k2 * %d], X_s)\n" % (bM, bN2), J + "T.reduce_sum(X_s, rs, dim=1, clear=False)\n",
                J + "u = u + X_s[t2 %% %d, (t2 + k2) %% %d]\n" % (bM, bN2),
                I + "T.copy(rs, D[b2 * %d])\n" % bM, I + "Dz[b2, t2] = u\n"]
        Cp = pad2(Cf, nby * bM, nb2 * bN2)
        D = np.zeros(nby * bM)
        Dz = np.zeros((nby, T2))
        t2 = np.arange(T2)
        for b2 in range(nby):
            for k2 in range(nb2 - (b2 % 2 if ext2 == "tail" else 0)):
                blk = Cp[b2 * bM:(b2 + 1) * bM, k2 * bN2:(k2 + 1) * bN2]
                D[b2 * bM:(b2 + 1) * bM] += blk.sum(axis=1)
                Dz[b2] += blk[t2 % bM, (t2 + k2) % bN2]
    # parameters: inputs (in add_in order), then outputs (in add_out order)
    # (a tensor a launch reads is no output: C when the third launch reads it, S when the first writes it)
    ins = params_in + [tensor("S0", (4,), "float32")] * pre_kernel + [tensor("S", (4,), "float32")] * glob_atomic + \
        [tensor("C", (M, N), "float32")] * post
    outs = [tensor("C", (M, N), "float32")] * (not post) + [tensor("Z", (nby, nbx, T_), "float32")] + \
        [tensor("H", (nby, nbx, 16), "float32")] * (pt_atomic and h_out == "copy") + \
        [tensor("D", (M,), "float32"), tensor("Dz", (nby, T2), "float32")] * post
    body_src = kernel_src(name, ins + outs, (nbx, nby), threads, L)
    if head or tail:
        i0 = body_src.index("    with T.Kernel")
        body_src = body_src[:i0] + "".join(head) + body_src[i0:] + "".join(tail)
    if ext == "sym":
        body_src = body_src.replace("@T.prim_func", "K = T.symbolic('K')\n\n@T.prim_func", 1)
    desc = dict(dt=dt, bN=bN, bK=bK, threads=threads, M=M, N=N, K=K, loops=loops, ext=ext, binding=binding, outer=outer,
                loop=loop_desc, pt_read=pt_read, pt_store=pt_store, pt_atomic=pt_atomic, h_init=h_init, h_out=h_out, scale=scale,
                red=red, acc_read=acc_read, frag_store=frag_store, overwrite=overwrite, glob_atomic=glob_atomic, pre_kernel=pre_kernel)
    if post:
        desc.update(bN2=bN2, T2=T2, ext2=ext2, s2=s2)
    p = Prog(name, family, body_src, desc)
    p.add_in(A, dt)
    p.add_in(B, dt)
    vsum = np.array([v[:, :, tid % 4 == g].sum() for g in range(4)])
    tol = (1e-5, 1e-4)
    if pre_kernel:
        p.add_in(S0, "float32")
    if glob_atomic:  # the threads' v summed into 4 slots, in any order
        S1 = rs.randint(-8, 9, (4,)) / 4.0
        si = p.add_in(S1, "float32", "inout")
        p.inout_refs[si] = ((S0 * 2.0 if pre_kernel else S1) + vsum, "float32", 1e-5, 1e-3)
    if post:
        ci = p.add_in(vals(rs, (M, N), "float32") + 100.0, "float32", "inout")
        p.inout_refs[ci] = (Cf, "float32") + tol
    else:
        p.add_out(Cf, "float32", tol)
    p.add_out(v, "float32", tol)
    if pt_atomic and h_out == "copy":
        p.add_out(H, "float32", tol)
    if post:
        p.add_out(D[:M], "float32", (1e-5, 1e-3))
        p.add_out(Dz, "float32", tol)
    return p


def gen_pipes(R, rs, name):
    return _pipes(R, rs, name, "pipes")


def gen_launches(R, rs, name):
    return _pipes(R, rs, name, "launches")


# ---------------------------------------------------------------- invalid programs: a located error
# (statements, a phrase the error must contain, the error's line counted from the first statement):
# each invalid by language.md. The kernel around them has X, Y, x, r, r_long, s_a, s_b (gen_invalid).
LOOP = "\n" + J
INVALID_STATEMENTS = [
    ("T.fill(x[0:%(bM4)d, 0:%(bN)d], 1.0)", "out of bounds", 0),          # 4.5: a provably out-of-range fill
    ("T.reduce_sum(x, r_long, dim=1)", "destination", 0),                 # dst is not src without dim
    ("T.reduce_sum(x, r, dim=2)", "dim", 0),                              # no such dimension
    ("x[0, 0] = x[0, 0] << 2", "integer", 0),                             # 2.5: shifts take integers only
    ("T.copy(X[0:%(bM)d, 0:%(bN)d], r)", "shape", 0),                     # shapes must match
    ("T.copy(x[0, 0], s_a[0, 0])", "at least one side", 0),               # 4.5: not both points
    ("T.gemm(x, x, r)", "gemm", 0),                                       # C of the wrong shape
    ("T.gemm(s_a, s_b, r_int)", "integer C", 0),                          # 4.5: float operands, integer C
    ("x[0, 0] = by // 0", "zero", 0),                                     # 2.5: a constant 0 divisor
    ("x[0, 0] = T.cast(bx %% 0, 'float32')", "zero", 0),
    ("x[0, 0] = T.cast(bx << 40, 'float32')", "shift", 0),                # 2.5: a constant amount out of range
    ("x[0, 0] = X[-1, 0]", "out of bounds", 0),                           # 2.5: negative indices are not wrapped
    ("x[0, 0] = T.cast(1.0, 'float13')", "unknown dtype", 0),
    ("x[0, 0] = T.call_extern('float32', 'not a name', 1.0)", "function name", 0),  # 4.8
    ("T.atomic_max(X[0, 0], 1.0)", "not supported", 0),                   # 4: not a T. function
    ("x[0, 0] = undefined_name", "undefined_name", 0),
    ("x[0, 0] = T.get_thread_binding(3)", "thread dimension", 0),
    ("x[0, 0] = T.if_then_else(bx > 0, 1.0)", "false_value", 0),
    ("for k in T.serial(0, 4, 0):" + LOOP + "x[k, 0] = 1.0", "step", 0),           # 4.4: steps are nonzero
    ("for k in T.serial(0, 4, bx):" + LOOP + "x[k, 0] = 1.0", "compile time", 0),  # ... compile-time integers
    ("for i, j in T.Parallel(4):" + LOOP + "x[i, 0] = 1.0", "loop variables", 0),
    ("for q in T.serial(4):" + LOOP + "x[q, 0] = 1.0\n" + I + "x[q, 1] = 2.0", "outside the loop", 2),  # 2.3
    # 4.4: a schedule's lists differ in length; stage -1 on a statement that is no pipelined copy
    ("for k in T.Pipelined(2, num_stages=2, order=[0, 1], stage=[0], group=[[0], [1]]):" + LOOP + "T.copy(X[k * 16, 0], s_b)" + LOOP +
     "T.gemm(s_a, s_b, x)", "stage entries", 0),
    ("for k in T.Pipelined(2, num_stages=2, order=[0, -1], stage=[0, -1], group=[[0], [1]]):" + LOOP + "T.copy(X[k * 16, 0], s_b)" + LOOP +
     "T.gemm(s_a, s_b, x)", "stage -1", 2),
]


def gen_invalid(R, rs, name):
    """A valid tile program with invalid statements in its middle: tl must exit 1 with
    prog.py:LINE:COL: error: at the offending one, naming the problem (Prog.expect_error)."""
    bM, bN = R.choice([16, 32]), R.choice([16, 32])
    M, N = 2 * bM, 2 * bN
    bad, phrase, line_offset = R.choice(INVALID_STATEMENTS)
    bad %= dict(bM=bM, bN=bN, bM4=bM + 4)
    head = [I + "x = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN),
            I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM,
            I + "r_long = T.alloc_fragment((%d,), 'float32')\n" % (bM + 1),
            I + "r_int = T.alloc_fragment((%d, %d), 'int32')\n" % (bM, bN),
            I + "s_a = T.alloc_shared((%d, 16), 'float16')\n" % bM,
            I + "s_b = T.alloc_shared((16, %d), 'float16')\n" % bN,
            I + "T.copy(X[by * %d, bx * %d], x)\n" % (bM, bN)]
    tail = [I + "T.reduce_max(x, r, dim=1)\n", I + "T.copy(r, Y[bx, by * %d])\n" % bM]
    params = [tensor("X", (M, N), "float32"), tensor("Y", (2, M), "float32")]
    bad_line = kernel_src(name, params, (2, 2), 128, head).count("\n") + 1 + line_offset
    src = kernel_src(name, params, (2, 2), 128, head + [I + bad + "\n"] + tail)
    p = Prog(name, "invalid", src, dict(bad=bad, line=bad_line))
    p.add_in(vals(rs, (M, N), "float32"), "float32")
    p.expect_error = (bad_line, phrase)
    return p


FAMILIES = {"sched": gen_sched, "parallel": gen_parallel, "cast": gen_cast, "intops": gen_intops, "reduce_axes": gen_reduce_axes,
            "accum": gen_accum, "regions": gen_regions, "scan": gen_scan, "atomic": gen_atomic, "threads": gen_threads, "mixed": gen_mixed, "mixed_gemm": gen_mixed_gemm, "symbolic": gen_symbolic, "pipes": gen_pipes,
            "launches": gen_launches, "invalid": gen_invalid}
