"""The random tile-program families of tools/difftest: each generator builds one TileLang tile
program (@T.prim_func) from a random.Random R and a numpy RandomState rs, with its inputs and a
NumPy float64 reference (computed on the padded tiles, rounded to the output type), as a Prog;
write() puts it into a directory (prog.py, in*.npy, ref*.npy, meta.json) for compare.py.
A library module of tools/difftest (difftest.py runs the tool)."""
import json, os
import numpy as np
import npy_io

LOG2E = 1.44269504


def cdiv(a, b):
    return -(-a // b)


def vals(rs, shape, dt):
    if dt in ("float16", "bfloat16"):
        return rs.randint(-16, 17, shape) / 16.0
    if dt == "float8_e4m3":
        return rs.randint(-16, 17, shape) / 8.0
    if dt == "float8_e5m2":
        return rs.randint(-8, 9, shape) / 4.0
    if dt == "int8":
        return rs.randint(-8, 9, shape).astype(np.float64)
    if dt == "float32":
        return rs.randint(-64, 65, shape) / 64.0
    raise ValueError(dt)


def pad2(x, r, c):
    out = np.zeros((r, c))
    out[: x.shape[0], : x.shape[1]] = x
    return out


TOL = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2),
       "int32": (0, 0), "float8_e4m3": (0.07, 0.07)}


class Prog:
    def __init__(self, name, family, src, desc):
        self.name, self.family, self.src, self.desc = name, family, src, desc
        self.ins = []     # (kind, values, dtype)
        self.outs = []    # (ref values, dtype, rtol, atol)   outputs not passed with --in
        self.inout_refs = {}  # index in ins -> (ref, dtype, rtol, atol)
        self.expect_error = None  # an invalid program: (line, phrase) of the error tl must report

    def add_in(self, v, dt, kind="in"):
        self.ins.append((kind, v, dt))
        return len(self.ins) - 1

    def add_out(self, ref, dt, tol=None):
        r, a = tol or TOL[dt]
        self.outs.append((ref, dt, r, a))


# ---------------------------------------------------------------- GEMM (16-bit)
def gen_gemm(R, rs, name):
    dt = R.choice(["float16", "bfloat16"])
    bM = R.choice([16, 32, 48, 64, 64, 64, 128, 128, 80, 96])
    bN = R.choice([16, 32, 48, 64, 64, 80, 96, 128, 128])
    bK = R.choice([16, 32, 32, 48, 64, 64])
    tA, tB = R.random() < 0.3, R.random() < 0.4
    threads = R.choice([128, 128, 256]) if bM >= 64 else R.choice([64, 128])
    def dim(b, cap):
        if R.random() < 0.3:
            return b * R.randint(1, max(1, cap // b))
        return R.randint(max(1, b // 3), max(2, min(cap, 3 * b)))
    M, N, K = dim(bM, 256), dim(bN, 256), dim(bK, 192)
    loop = R.choice(["pipe", "pipe", "pipe", "serial", "sched"])
    stages = R.choice([1, 2, 3, 4])
    while stages * (bM * bK + bK * bN) * 2 > 150000:
        stages -= 1
    ws = R.choice([None, None, False])
    swz = R.choice([0, 0, 2, 3, 8])
    clear = R.choice(["clear", "fill", "fillv"])
    eps = [e for e in ["scale", "bias", "relu", "exp2", "cast", "stage"] if R.random() < 0.3]
    out_dt = R.choice(["float32", dt])
    rowstat = R.choice([None, None, "reduce_max", "reduce_sum"])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    Np = nbx * bN
    a_shape = (K, M) if tA else (M, K)
    b_shape = (N, K) if tB else (K, N)
    fill_v = 0.0 if clear != "fillv" else R.choice([0.5, -1.0])
    scale = R.choice([0.5, 0.25, 2.0])
    params = ["A: T.Tensor(%r, %r)" % (a_shape, dt), "B: T.Tensor(%r, %r)" % (b_shape, dt)]
    if "bias" in eps:
        params.append("Bias: T.Tensor((%d,), 'float32')" % Np)
    params.append("C: T.Tensor((%d, %d), %r)" % (M, N, out_dt))
    if rowstat:
        params.append("R: T.Tensor((%d, %d), 'float32')" % (nbx, M))
    L = []
    L.append("import tilelang.language as T\n\n")
    L.append("# %s\n" % name)
    L.append("@T.prim_func\ndef main(%s):\n" % ", ".join(params))
    L.append("    with T.Kernel(%d, %d, threads=%d) as (bx, by):\n" % (nbx, nby, threads))
    I = "        "
    if swz:
        L.append(I + "T.use_swizzle(panel_size=%d)\n" % swz)
    L.append(I + "A_shared = T.alloc_shared(%r, %r)\n" % ((bK, bM) if tA else (bM, bK), dt))
    L.append(I + "B_shared = T.alloc_shared(%r, %r)\n" % ((bN, bK) if tB else (bK, bN), dt))
    L.append(I + "C_local = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    if clear == "clear":
        L.append(I + "T.clear(C_local)\n")
    else:
        L.append(I + "T.fill(C_local, %r)\n" % fill_v)
    nk = cdiv(K, bK)
    if loop == "pipe":
        ws_s = "" if ws is None else ", warp_specialize=%r" % ws
        L.append(I + "for k in T.Pipelined(%d, num_stages=%d%s):\n" % (nk, stages, ws_s))
    elif loop == "serial":
        L.append(I + "for k in T.serial(%d):\n" % nk)
    else:
        L.append(I + "for k in T.Pipelined(%d, num_stages=%d, order=[-1, -1, 0], stage=[-1, -1, 0], group=[[0], [1], [2]]):\n" % (nk, max(stages, 2)))
    J = I + "    "
    L.append(J + ("T.copy(A[k * %d, by * %d], A_shared)\n" % (bK, bM) if tA else "T.copy(A[by * %d, k * %d], A_shared)\n" % (bM, bK)))
    L.append(J + ("T.copy(B[bx * %d, k * %d], B_shared)\n" % (bN, bK) if tB else "T.copy(B[k * %d, bx * %d], B_shared)\n" % (bK, bN)))
    L.append(J + "T.gemm(A_shared, B_shared, C_local, transpose_A=%r, transpose_B=%r)\n" % (tA, tB))
    # reference on padded arrays
    A = vals(rs, a_shape, dt)
    B = vals(rs, b_shape, dt)
    Am = A.T if tA else A
    Bm = B.T if tB else B
    Mp, Kp = nby * bM, nk * bK
    Cp = pad2(Am, Mp, Kp) @ pad2(Bm, Kp, Np) + fill_v
    bias = vals(rs, (Np,), "float32") if "bias" in eps else None
    body = "C_local[i, j]"
    expr = None
    if "scale" in eps:
        expr = "C_local[i, j] * %r" % scale
        Cp = Cp * scale
    if "bias" in eps:
        expr = "%s + Bias[bx * %d + j]" % (expr or body, bN)
        Cp = Cp + bias[None, :]
    if "relu" in eps:
        expr = "T.max(%s, 0.0)" % (expr or body)
        Cp = np.maximum(Cp, 0)
    if "exp2" in eps:
        expr = "T.exp2((%s) * 0.0625)" % (expr or body)
        Cp = np.exp2(Cp * 0.0625)
    if expr:
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
        L.append(J + "C_local[i, j] = %s\n" % expr)
    if rowstat:
        L.append(I + "r = T.alloc_fragment((%d,), 'float32')\n" % bM)
        L.append(I + "T.%s(C_local, r, dim=1)\n" % rowstat)
        L.append(I + "T.copy(r, R[bx, by * %d])\n" % bM)
        t = Cp.reshape(Mp, nbx, bN)
        rr = t.max(axis=2) if rowstat == "reduce_max" else t.sum(axis=2)
        rref = rr.T[:, :M]
    src_tile = "C_local"
    if "cast" in eps:
        L.append(I + "C_cast = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, dt))
        L.append(I + "T.copy(C_local, C_cast)\n")
        src_tile = "C_cast"
        Cp = npy_io.round_to(Cp, dt)
    if "stage" in eps:
        L.append(I + "C_shared = T.alloc_shared((%d, %d), %r)\n" % (bM, bN, out_dt))
        L.append(I + "T.copy(%s, C_shared)\n" % src_tile)
        src_tile = "C_shared"
    L.append(I + "T.copy(%s, C[by * %d, bx * %d])\n" % (src_tile, bM, bN))
    desc = dict(dt=dt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, tA=tA, tB=tB, loop=loop, stages=stages,
                ws=ws, swz=swz, eps=eps, out=out_dt, rowstat=rowstat, threads=threads)
    p = Prog(name, "gemm", "".join(L), desc)
    p.add_in(A, dt)
    p.add_in(B, dt)
    if bias is not None:
        p.add_in(bias, "float32")
    ref = npy_io.round_to(Cp[:M, :N], out_dt)
    rt = TOL[out_dt]
    if "exp2" in eps:
        rt = (max(rt[0], 1e-4), max(rt[1], 1e-4))
    p.add_out(ref, out_dt, rt)
    if rowstat:
        p.add_out(rref, "float32", (1e-4, 1e-3))
    return p


# ---------------------------------------------------------------- GEMM (8-bit)
def gen_gemm8(R, rs, name):
    adt = R.choice(["float8_e4m3", "int8", "int8", "float8_e4m3"])
    bdt = adt if R.random() < 0.8 else ("float8_e5m2" if adt == "float8_e4m3" else "int8")
    acc = "int32" if adt == "int8" else "float32"
    bM = R.choice([64, 64, 128, 16, 32, 48])
    bN = R.choice([16, 32, 48, 64, 64, 96, 128, 128])
    bK = R.choice([32, 64, 64, 128])
    tB = R.random() < 0.85
    threads = R.choice([128, 256]) if bM >= 128 else 128
    M = R.randint(max(1, bM // 2), min(256, 3 * bM))
    N = R.randint(max(1, bN // 2), min(256, 3 * bN))
    K = R.choice([bK * R.randint(1, 3), R.randint(8, 256)])
    stages = R.choice([1, 2, 3, 4])
    while stages * (bM * bK + bK * bN) > 150000:
        stages -= 1
    swz = R.choice([0, 0, 4])
    nbx, nby, nk = cdiv(N, bN), cdiv(M, bM), cdiv(K, bK)
    b_shape = (N, K) if tB else (K, N)
    out = acc
    epi = None
    if acc == "int32" and R.random() < 0.3:
        out, epi = "float32", "i2f"
    elif acc == "float32" and R.random() < 0.3:
        out = "bfloat16"
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(A: T.Tensor((%d, %d), %r), B: T.Tensor(%r, %r), C: T.Tensor((%d, %d), %r)):\n" % (M, K, adt, b_shape, bdt, M, N, out))
    L.append("    with T.Kernel(%d, %d, threads=%d) as (bx, by):\n" % (nbx, nby, threads))
    I = "        "
    if swz:
        L.append(I + "T.use_swizzle(panel_size=%d)\n" % swz)
    L.append(I + "A_shared = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, adt))
    L.append(I + "B_shared = T.alloc_shared(%r, %r)\n" % ((bN, bK) if tB else (bK, bN), bdt))
    L.append(I + "C_local = T.alloc_fragment((%d, %d), %r)\n" % (bM, bN, acc))
    L.append(I + "T.clear(C_local)\n")
    L.append(I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (nk, stages))
    J = I + "    "
    L.append(J + "T.copy(A[by * %d, k * %d], A_shared)\n" % (bM, bK))
    L.append(J + ("T.copy(B[bx * %d, k * %d], B_shared)\n" % (bN, bK) if tB else "T.copy(B[k * %d, bx * %d], B_shared)\n" % (bK, bN)))
    L.append(J + "T.gemm(A_shared, B_shared, C_local, transpose_B=%r)\n" % tB)
    A = vals(rs, (M, K), adt)
    B = vals(rs, b_shape, bdt)
    C = A @ (B.T if tB else B)
    if epi == "i2f":
        L.append(I + "C_f = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
        L.append(J + "C_f[i, j] = T.cast(C_local[i, j], 'float32') * 0.5\n")
        L.append(I + "T.copy(C_f, C[by * %d, bx * %d])\n" % (bM, bN))
        C = C * 0.5
    else:
        L.append(I + "T.copy(C_local, C[by * %d, bx * %d])\n" % (bM, bN))
    p = Prog(name, "gemm8", "".join(L), dict(adt=adt, bdt=bdt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, tB=tB, stages=stages, out=out, threads=threads, swz=swz))
    p.add_in(A, adt)
    p.add_in(B, bdt)
    p.add_out(npy_io.round_to(C, out), out)
    return p


# ---------------------------------------------------------------- row softmax
def gen_softmax(R, rs, name):
    dt = R.choice(["float32", "float16", "bfloat16"])
    out_dt = R.choice([dt, "float32"])
    bM = R.choice([1, 2, 4, 8, 16, 32, 64])
    M = R.randint(1, 4 * bM + 3)
    N = R.randint(4, 256)
    mult = R.choice([1, 8, 16, 32])
    Np = cdiv(N, mult) * mult
    mask = Np != N and R.random() < 0.6
    threads = R.choice([32, 64, 128, 256])
    via_shared = R.random() < 0.3
    stats = R.random() < 0.4
    scale = R.choice([1.0, 0.5, 2.0]) * LOG2E
    nb = cdiv(M, bM)
    params = ["X: T.Tensor((%d, %d), %r)" % (M, N, dt), "Y: T.Tensor((%d, %d), %r)" % (M, N, out_dt)]
    if stats:
        params.append("S: T.Tensor((%d,), 'float32')" % M)
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(%s):\n" % ", ".join(params))
    L.append("    with T.Kernel(%d, threads=%d) as bx:\n" % (nb, threads))
    I = "        "
    J = I + "    "
    L.append(I + "x = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, Np))
    L.append(I + "row_max = T.alloc_fragment((%d,), 'float32')\n" % bM)
    L.append(I + "row_sum = T.alloc_fragment((%d,), 'float32')\n" % bM)
    if via_shared:
        L.append(I + "xs = T.alloc_shared((%d, %d), %r)\n" % (bM, Np, dt))
        L.append(I + "T.copy(X[bx * %d, 0], xs)\n" % bM)
        L.append(I + "T.copy(xs, x)\n")
    else:
        L.append(I + "T.copy(X[bx * %d, 0], x)\n" % bM)
    X = vals(rs, (M, N), dt) * R.choice([1, 4])
    Xp = pad2(X, nb * bM, Np)
    if mask:
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, Np))
        L.append(J + "x[i, j] = T.if_then_else(j < %d, x[i, j], -T.infinity('float32'))\n" % N)
        Xp[:, N:] = -np.inf
    L.append(I + "T.reduce_max(x, row_max, dim=1, clear=True)\n")
    L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, Np))
    L.append(J + "x[i, j] = T.exp2(x[i, j] * %r - row_max[i] * %r)\n" % (scale, scale))
    L.append(I + "T.reduce_sum(x, row_sum, dim=1)\n")
    L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, Np))
    L.append(J + "x[i, j] = x[i, j] / row_sum[i]\n")
    L.append(I + "T.copy(x, Y[bx * %d, 0])\n" % bM)
    m = Xp.max(axis=1, keepdims=True)
    e = np.exp2(Xp * scale - m * scale)
    s = e.sum(axis=1, keepdims=True)
    Y = e / s
    if stats:
        L.append(I + "for i in T.Parallel(%d):\n" % bM)
        L.append(J + "row_sum[i] = T.log2(row_sum[i]) + row_max[i] * %r\n" % scale)
        L.append(I + "T.copy(row_sum, S[bx * %d])\n" % bM)
    p = Prog(name, "softmax", "".join(L), dict(dt=dt, out=out_dt, bM=bM, M=M, N=N, Np=Np, mask=mask, threads=threads, via_shared=via_shared, stats=stats))
    p.add_in(X, dt)
    p.add_out(npy_io.round_to(Y[:M, :N], out_dt), out_dt, (max(TOL[out_dt][0], 1e-4), max(TOL[out_dt][1], 1e-5)))
    if stats:
        p.add_out((np.log2(s[:, 0]) + m[:, 0] * scale)[:M], "float32", (1e-4, 1e-4))
    return p


# ---------------------------------------------------------------- tile reductions
def gen_reduce(R, rs, name):
    dt = R.choice(["float32", "float16", "bfloat16"])
    op = R.choice(["sum", "max", "min", "abssum", "absmax"])
    dim = R.choice([0, 1])
    bM = R.choice([4, 8, 16, 32, 64])
    bN = R.choice([8, 16, 32, 48, 64, 128])
    M = R.randint(1, 3 * bM + 5)
    N = R.randint(1, 3 * bN + 5)
    threads = R.choice([32, 64, 128, 256])
    frag = R.choice(["fragment", "shared"])
    clear = R.random() < 0.7
    atomic = op == "sum" and dim == 0 and R.random() < 0.5
    rdt = "float32"
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    X = vals(rs, (M, N), dt)
    Xp = pad2(X, nby * bM, nbx * bN)
    t = Xp.reshape(nby, bM, nbx, bN)
    f = {"sum": lambda a, ax: a.sum(axis=ax), "max": lambda a, ax: a.max(axis=ax), "min": lambda a, ax: a.min(axis=ax),
         "abssum": lambda a, ax: np.abs(a).sum(axis=ax), "absmax": lambda a, ax: np.abs(a).max(axis=ax)}[op]
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    I = "        "
    J = I + "    "
    init = R.choice([0.25, -0.5, 1.0])
    if atomic:
        params = "X: T.Tensor((%d, %d), %r), S: T.Tensor((%d,), 'float32')" % (M, N, dt, N)
    elif dim == 1:
        params = "X: T.Tensor((%d, %d), %r), O: T.Tensor((%d, %d), %r)" % (M, N, dt, nbx, M, rdt)
    else:
        params = "X: T.Tensor((%d, %d), %r), O: T.Tensor((%d, %d), %r)" % (M, N, dt, nby, N, rdt)
    L.append("@T.prim_func\ndef main(%s):\n" % params)
    L.append("    with T.Kernel(%d, %d, threads=%d) as (bx, by):\n" % (nbx, nby, threads))
    alloc = "T.alloc_fragment" if frag == "fragment" else "T.alloc_shared"
    L.append(I + "tile = %s((%d, %d), %r)\n" % (alloc, bM, bN, dt if R.random() < 0.5 else "float32"))
    n_r = bN if dim == 0 else bM
    L.append(I + "r = T.alloc_fragment((%d,), %r)\n" % (n_r, rdt))
    L.append(I + "T.copy(X[by * %d, bx * %d], tile)\n" % (bM, bN))
    if not clear:
        L.append(I + "T.fill(r, %r)\n" % init)
    L.append(I + "T.reduce_%s(tile, r, dim=%d, clear=%r)\n" % (op, dim, clear))
    red = f(t, 3 if dim == 1 else 1)  # dim1: (nby,bM,nbx) ; dim0: (nby,nbx,bN)
    if not clear:
        comb = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum, "min": np.minimum}[op]
        red = comb(red, init)
    p = Prog(name, "reduce", "", dict(dt=dt, op=op, dim=dim, bM=bM, bN=bN, M=M, N=N, threads=threads, frag=frag, clear=clear, atomic=atomic))
    p.add_in(X, dt)
    if atomic:
        S0 = vals(rs, (N,), "float32")
        p.add_in(S0, "float32", "inout")
        L.append(I + "for j in T.Parallel(%d):\n" % bN)
        L.append(J + "if bx * %d + j < %d:\n" % (bN, N))
        L.append(J + "    T.atomic_add(S[bx * %d + j], r[j])\n" % bN)
        p.inout_refs[1] = (S0 + red.sum(axis=0).reshape(-1)[:N], "float32", 1e-4, 1e-4)
    elif dim == 1:
        L.append(I + "T.copy(r, O[bx, by * %d])\n" % bM)
        ref = red.transpose(2, 0, 1).reshape(nbx, nby * bM)[:, :M]
        p.add_out(ref, rdt, (1e-4, 1e-4))
    else:
        L.append(I + "T.copy(r, O[by, bx * %d])\n" % bN)
        ref = red.reshape(nby, nbx * bN)[:, :N]
        p.add_out(ref, rdt, (1e-4, 1e-4))
    p.src = "".join(L)
    return p


# ---------------------------------------------------------------- attention (flash, online softmax)
EXAMPLE_ATTENTION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "flash_attention.py")


def attention_source(d):
    """examples/flash_attention.py with the drawn parameters as its factory's defaults and num_stages drawn too."""
    with open(EXAMPLE_ATTENTION) as f:
        src = f.read()
    signature = ('def flash_attention(batch, heads, seq_len, dim, is_causal=False, block_M=None, block_N=None, dtype="bfloat16", '
                 'warp_specialize=None, threads=None, pipelined_softmax=None):')
    drawn = ("def flash_attention(batch=%(batch)d, heads=%(heads)d, seq_len=%(seq)d, dim=%(dim)d, is_causal=%(causal)r, block_M=%(bM)d, "
             "block_N=%(bN)d, dtype=%(dt)r, warp_specialize=None, threads=%(threads)d, pipelined_softmax=%(ps)r, num_stages=%(stages)d):") % d
    assert src.count(signature) == 1 and src.count("num_stages=2,") == 1, "examples/flash_attention.py changed: update attention_source"
    return "# %s\n" % d["name"] + src.replace(signature, drawn).replace("num_stages=2,", "num_stages=num_stages,")


def gen_attn(R, rs, name):
    dt = R.choice(["bfloat16", "float16", "bfloat16", "float8_e4m3"])
    dim = R.choice([64, 64, 128, 32])
    bM = R.choice([64, 64, 128])
    bN = R.choice([32, 48, 64, 64, 80, 96, 128])
    if dt == "float8_e4m3":
        bN = R.choice([64, 128])
        if dim == 32:
            dim = 64
    batch, heads = R.choice([(1, 1), (1, 2), (2, 1)])
    seq = R.randint(16, 260 if dim <= 64 else 160)
    causal = R.random() < 0.4
    ps = R.random() < 0.5 if dt != "float8_e4m3" else False
    stages = R.choice([1, 2, 2])
    threads = 128 * (bM // 64)
    d = dict(name=name, batch=batch, heads=heads, seq=seq, dim=dim, causal=causal, bM=bM, bN=bN, dt=dt, threads=threads, ps=ps, stages=stages)
    src = attention_source(d)
    shape = (batch, seq, heads, dim)
    Q, K, V = vals(rs, shape, dt), vals(rs, shape, dt), vals(rs, shape, dt)
    scale = (1.0 / dim) ** 0.5
    s = np.einsum("bqhd,bkhd->bhqk", Q, K) * scale
    if causal:
        msk = np.tril(np.ones((seq, seq), bool))
        s = np.where(msk, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    O = np.einsum("bhqk,bkhd->bqhd", p, V)
    out_dt = "bfloat16" if dt == "float8_e4m3" else dt
    pr = Prog(name, "attention", src, d)
    pr.add_in(Q, dt)
    pr.add_in(K, dt)
    pr.add_in(np.ascontiguousarray(V.transpose(0, 2, 3, 1)) if dt == "float8_e4m3" else V, dt)
    tol = (3e-2, 3e-2) if dt != "float8_e4m3" else (0.1, 0.1)
    pr.add_out(npy_io.round_to(O, out_dt), out_dt, tol)
    return pr


# ---------------------------------------------------------------- gemm chain (S = A B^T -> P -> O = P C)
def gen_chain(R, rs, name):
    dt = R.choice(["bfloat16", "float16", "float8_e4m3"])
    eight = dt == "float8_e4m3"
    bM = R.choice([64, 64, 128, 32, 16])
    W = R.choice([16, 32, 48, 64, 64, 80, 96, 128]) if not eight else R.choice([32, 64, 96, 128])
    D = R.choice([32, 64, 64, 128])
    KD = R.choice([32, 64, 128]) if not eight else R.choice([32, 64, 128])
    M = R.randint(1, 3 * bM + 7)
    threads = max(128, 128 * (bM // 64)) if R.random() < 0.8 else 128
    epi = R.choice(["none", "scale", "relu", "softmax", "softmax"])
    nb = cdiv(M, bM)
    acc = "float32"
    c_shape = (D, W) if eight else (W, D)
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(A: T.Tensor((%d, %d), %r), B: T.Tensor((%d, %d), %r), C: T.Tensor(%r, %r), O: T.Tensor((%d, %d), 'float32')):\n" % (M, KD, dt, W, KD, dt, c_shape, dt, M, D))
    L.append("    with T.Kernel(%d, threads=%d) as bx:\n" % (nb, threads))
    I = "        "
    J = I + "    "
    L.append(I + "A_shared = T.alloc_shared((%d, %d), %r)\n" % (bM, KD, dt))
    L.append(I + "B_shared = T.alloc_shared((%d, %d), %r)\n" % (W, KD, dt))
    L.append(I + "C_shared = T.alloc_shared(%r, %r)\n" % (c_shape, dt))
    L.append(I + "S = T.alloc_fragment((%d, %d), %r)\n" % (bM, W, acc))
    L.append(I + "P = T.alloc_fragment((%d, %d), %r)\n" % (bM, W, dt))
    L.append(I + "acc = T.alloc_fragment((%d, %d), %r)\n" % (bM, D, acc))
    L.append(I + "T.copy(A[bx * %d, 0], A_shared)\n" % bM)
    L.append(I + "T.copy(B, B_shared)\n")
    L.append(I + "T.copy(C, C_shared)\n")
    L.append(I + "T.gemm(A_shared, B_shared, S, clear_accum=True, transpose_B=True)\n")
    A = vals(rs, (M, KD), dt)
    B = vals(rs, (W, KD), dt)
    C = vals(rs, c_shape, dt)
    Ap = pad2(A, nb * bM, KD)
    S = Ap @ B.T
    if epi == "scale":
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, W))
        L.append(J + "S[i, j] = S[i, j] * 0.125\n")
        S = S * 0.125
    elif epi == "relu":
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, W))
        L.append(J + "S[i, j] = T.max(S[i, j], 0.0) * 0.25\n")
        S = np.maximum(S, 0) * 0.25
    elif epi == "softmax":
        L.append(I + "m = T.alloc_fragment((%d,), 'float32')\n" % bM)
        L.append(I + "T.reduce_max(S, m, dim=1)\n")
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, W))
        L.append(J + "S[i, j] = T.exp2(S[i, j] * 0.25 - m[i] * 0.25)\n")
        S = np.exp2(S * 0.25 - S.max(axis=1, keepdims=True) * 0.25)
    L.append(I + "T.copy(S, P)\n")
    P = npy_io.round_to(S, dt)
    L.append(I + "T.gemm(P, C_shared, acc, clear_accum=True, transpose_B=%r)\n" % eight)
    O = P @ (C.T if eight else C)
    L.append(I + "T.copy(acc, O[bx * %d, 0])\n" % bM)
    pr = Prog(name, "chain", "".join(L), dict(dt=dt, bM=bM, W=W, D=D, KD=KD, M=M, threads=threads, epi=epi))
    pr.add_in(A, dt)
    pr.add_in(B, dt)
    pr.add_in(C, dt)
    # P rounding is reproduced exactly only when S is exact; exp2 approximations may flip a rounding
    tol = (2e-2, 5e-2) if epi == "softmax" else (1e-4, 1e-4)
    if eight:
        tol = (0.1, 0.3) if epi == "softmax" else (0.07, 0.5)
    pr.add_out(O[:M], "float32", tol)
    return pr


# ---------------------------------------------------------------- split-K gemm with atomics
def gen_splitk(R, rs, name):
    dt = R.choice(["float16", "bfloat16"])
    bM = R.choice([32, 64, 64, 128])
    bN = R.choice([32, 64, 64, 128])
    bK = R.choice([16, 32, 64])
    splits = R.choice([2, 3, 4])
    M = R.randint(bM // 2, 2 * bM + 3)
    N = R.randint(bN // 2, 2 * bN + 3)
    kper = R.randint(1, 3)
    K = splits * kper * bK - R.choice([0, 0, R.randint(1, bK - 1)])
    stages = R.choice([1, 2, 3])
    threads = 128 if bM < 128 else R.choice([128, 256])
    tile_atomic = M % bM == 0 and N % bN == 0
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(A: T.Tensor((%d, %d), %r), B: T.Tensor((%d, %d), %r), C: T.Tensor((%d, %d), 'float32')):\n" % (M, K, dt, K, N, dt, M, N))
    L.append("    with T.Kernel(%d, %d, %d, threads=%d) as (bx, by, bz):\n" % (nbx, nby, splits, threads))
    I = "        "
    J = I + "    "
    L.append(I + "A_shared = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt))
    L.append(I + "B_shared = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt))
    L.append(I + "C_local = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    L.append(I + "T.clear(C_local)\n")
    L.append(I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (kper, stages))
    L.append(J + "T.copy(A[by * %d, (bz * %d + k) * %d], A_shared)\n" % (bM, kper, bK))
    L.append(J + "T.copy(B[(bz * %d + k) * %d, bx * %d], B_shared)\n" % (kper, bK, bN))
    L.append(J + "T.gemm(A_shared, B_shared, C_local)\n")
    if tile_atomic:
        L.append(I + "T.atomic_add(C[by * %d, bx * %d], C_local)\n" % (bM, bN))
    else:
        L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
        L.append(J + "if by * %d + i < %d and bx * %d + j < %d:\n" % (bM, M, bN, N))
        L.append(J + "    T.atomic_add(C[by * %d + i, bx * %d + j], C_local[i, j])\n" % (bM, bN))
    A = vals(rs, (M, K), dt)
    B = vals(rs, (K, N), dt)
    C0 = vals(rs, (M, N), "float32")
    pr = Prog(name, "splitk", "".join(L), dict(dt=dt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, splits=splits, stages=stages, tile_atomic=tile_atomic))
    pr.add_in(A, dt)
    pr.add_in(B, dt)
    pr.add_in(C0, "float32", "inout")
    pr.inout_refs[2] = (C0 + A @ B, "float32", 1e-5, 1e-5)
    return pr


# ---------------------------------------------------------------- element-wise tile epilogue chains
def gen_elem(R, rs, name):
    idt = R.choice(["float16", "bfloat16", "float32"])
    odt = R.choice(["float16", "bfloat16", "float32"])
    bM = R.choice([8, 16, 32, 64])
    bN = R.choice([16, 32, 64, 128])
    M = R.randint(1, 3 * bM + 3)
    N = R.randint(1, 3 * bN + 3)
    threads = R.choice([64, 128, 256])
    nbx, nby = cdiv(N, bN), cdiv(M, bM)
    X = vals(rs, (M, N), idt)
    bias = vals(rs, (nbx * bN,), "float32")
    Xp = pad2(X, nby * bM, nbx * bN)
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(X: T.Tensor((%d, %d), %r), Bias: T.Tensor((%d,), 'float32'), Y: T.Tensor((%d, %d), %r)):\n" % (M, N, idt, nbx * bN, M, N, odt))
    L.append("    with T.Kernel(%d, %d, threads=%d) as (bx, by):\n" % (nbx, nby, threads))
    I = "        "
    J = I + "    "
    L.append(I + "xs = T.alloc_shared((%d, %d), %r)\n" % (bM, bN, idt))
    L.append(I + "x = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    L.append(I + "T.copy(X[by * %d, bx * %d], xs)\n" % (bM, bN))
    L.append(I + "T.copy(xs, x)\n")
    ops = R.sample(["scale", "bias", "relu", "exp2", "cast"], R.randint(1, 4))
    v = Xp.copy()
    L.append(I + "for i, j in T.Parallel(%d, %d):\n" % (bM, bN))
    for o in ops:
        if o == "scale":
            L.append(J + "x[i, j] = x[i, j] * 3.0\n"); v = v * 3.0
        elif o == "bias":
            L.append(J + "x[i, j] = x[i, j] + Bias[bx * %d + j]\n" % bN); v = v + bias[None, :]
        elif o == "relu":
            L.append(J + "x[i, j] = T.max(x[i, j], 0.0)\n"); v = np.maximum(v, 0)
        elif o == "exp2":
            L.append(J + "x[i, j] = T.exp2(x[i, j] * 0.5)\n"); v = np.exp2(v * 0.5)
        elif o == "cast":
            L.append(J + "x[i, j] = T.cast(T.cast(x[i, j], 'bfloat16'), 'float32')\n"); v = npy_io.round_bf16(v)
    L.append(I + "T.copy(x, Y[by * %d, bx * %d])\n" % (bM, bN))
    pr = Prog(name, "elem", "".join(L), dict(idt=idt, odt=odt, bM=bM, bN=bN, M=M, N=N, ops=ops))
    pr.add_in(X, idt)
    pr.add_in(bias, "float32")
    pr.add_out(npy_io.round_to(v[:M, :N], odt), odt, (max(TOL[odt][0], 1e-5), max(TOL[odt][1], 1e-5)))
    return pr


def write(p, outdir):
    d = os.path.join(outdir, p.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "prog.py"), "w") as fh:
        fh.write(p.src)
    args, checks = [], []
    for i, (kind, v, dt) in enumerate(p.ins):
        fn = "in%d.npy" % i
        npy_io.save(os.path.join(d, fn), v, dt)
        args.append([kind, fn])
        if kind == "inout":
            ref, rdt, r, a = p.inout_refs[i]
            np.save(os.path.join(d, "ref_in%d.npy" % i), ref.astype(np.int64 if rdt == "int32" else np.float64).astype(np.int32 if rdt == "int32" else np.float32))
            checks.append(dict(got=fn, ref="ref_in%d.npy" % i, dtype=rdt, rtol=r, atol=a, inout=True))
    outs = []
    for j, (ref, dt, r, a) in enumerate(p.outs):
        fn = "out%d.npy" % j
        outs.append(fn)
        small = np.all(np.isfinite(ref)) and np.all(ref == np.round(ref)) and np.abs(ref).max(initial=0) < 30000
        wide = {"float64": np.float64, "int64": np.int64}.get(dt)  # float32 would round float64 references
        np.save(os.path.join(d, "ref%d.npy" % j), ref.astype(np.int16) if small else ref.astype(wide) if wide else
                ref.astype(np.int32) if dt == "int32" else ref.astype(np.float32))
        checks.append(dict(got=fn, ref="ref%d.npy" % j, dtype=dt, rtol=r, atol=a))
    meta = dict(name=p.name, family=p.family, desc=p.desc, args=args, outs=outs, checks=checks)
    if getattr(p, "seed", False):  # a @tile_kernel: `tl compile` needs its inputs' specs (--in)
        meta["seed"] = True
    if p.expect_error:
        meta["expect_error"] = dict(line=p.expect_error[0], phrase=p.expect_error[1])
    with open(os.path.join(d, "meta.json"), "w") as fh:
        json.dump(meta, fh)
    return d




# ---------------------------------------------------------------- GEMM variants (batch, f16 accum, C in shared, register A, column reduce)
def gen_gemmx(R, rs, name):
    dt = R.choice(["float16", "bfloat16"])
    bM = R.choice([16, 32, 64, 64, 128])
    bN = R.choice([16, 32, 64, 64, 96, 128])
    bK = R.choice([16, 32, 64])
    Bt = R.choice([1, 2, 3])
    M = R.randint(max(1, bM // 2), 2 * bM + 5)
    N = R.randint(max(1, bN // 2), 2 * bN + 5)
    K = R.randint(8, 160)
    acc = R.choice(["float32", "float32", "float16"]) if dt == "float16" else "float32"
    cmem = R.choice(["fragment", "fragment", "shared"])
    areg = R.random() < 0.25
    colred = R.random() < 0.3
    threads = R.choice([128, (64, 2), (32, 4)]) if bM < 128 else R.choice([128, 256, (128, 2)])
    stages = R.choice([0, 1, 2, 3])
    swz = R.choice([0, 2, 4])
    nbx, nby, nk = cdiv(N, bN), cdiv(M, bM), cdiv(K, bK)
    out_dt = R.choice(["float32", dt])
    params = "A: T.Tensor((%d, %d, %d), %r), B: T.Tensor((%d, %d, %d), %r), C: T.Tensor((%d, %d, %d), %r)" % (Bt, M, K, dt, Bt, K, N, dt, Bt, M, N, out_dt)
    if colred:
        params += ", S: T.Tensor((%d, %d, %d), 'float32')" % (Bt, nby, N)
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(%s):\n" % params)
    L.append("    with T.Kernel(%d, %d, %d, threads=%r) as (bx, by, bz):\n" % (nbx, nby, Bt, threads))
    I = "        "
    J = I + "    "
    if swz:
        L.append(I + "T.use_swizzle(panel_size=%d)\n" % swz)
    if areg:
        L.append(I + "A_frag = T.alloc_fragment((%d, %d), %r)\n" % (bM, bK, dt))
    L.append(I + "A_shared = T.alloc_shared((%d, %d), %r)\n" % (bM, bK, dt))
    L.append(I + "B_shared = T.alloc_shared((%d, %d), %r)\n" % (bK, bN, dt))
    alloc = "T.alloc_fragment" if cmem == "fragment" else "T.alloc_shared"
    L.append(I + "C_acc = %s((%d, %d), %r)\n" % (alloc, bM, bN, acc))
    L.append(I + "T.clear(C_acc)\n")
    L.append(I + "for k in T.Pipelined(%d, num_stages=%d):\n" % (nk, stages))
    L.append(J + "T.copy(A[bz, by * %d : (by + 1) * %d, k * %d : (k + 1) * %d], A_shared)\n" % (bM, bM, bK, bK))
    L.append(J + "T.copy(B[bz, k * %d : (k + 1) * %d, bx * %d : (bx + 1) * %d], B_shared)\n" % (bK, bK, bN, bN))
    if areg:
        L.append(J + "T.copy(A_shared, A_frag)\n")
        L.append(J + "T.gemm(A_frag, B_shared, C_acc)\n")
    else:
        L.append(J + "T.gemm(A_shared, B_shared, C_acc)\n")
    A = vals(rs, (Bt, M, K), dt)
    B = vals(rs, (Bt, K, N), dt)
    Mp, Np, Kp = nby * bM, nbx * bN, nk * bK
    Cp = np.stack([pad2(A[b], Mp, Kp) @ pad2(B[b], Kp, Np) for b in range(Bt)])
    if acc == "float16":
        # CPU rounds per gemm call; GPU may accumulate differently -> loose tolerance
        Cp16 = np.zeros_like(Cp)
        for b in range(Bt):
            c = np.zeros((Mp, Np))
            for k in range(nk):
                c = npy_io.round_to(c + pad2(A[b], Mp, Kp)[:, k * bK:(k + 1) * bK] @ pad2(B[b], Kp, Np)[k * bK:(k + 1) * bK], "float16")
            Cp16[b] = c
        Cp = Cp16
    if colred:
        L.append(I + "s = T.alloc_fragment((%d,), 'float32')\n" % bN)
        L.append(I + "T.reduce_sum(C_acc, s, dim=0)\n")
        L.append(I + "T.copy(s, S[bz, by, bx * %d])\n" % bN)
        sref = Cp.reshape(Bt, nby, bM, Np).sum(axis=2)[:, :, :N]
    L.append(I + "T.copy(C_acc, C[bz, by * %d : (by + 1) * %d, bx * %d : (bx + 1) * %d])\n" % (bM, bM, bN, bN))
    p = Prog(name, "gemmx", "".join(L), dict(dt=dt, acc=acc, bM=bM, bN=bN, bK=bK, Bt=Bt, M=M, N=N, K=K, cmem=cmem, areg=areg, colred=colred, threads=threads, stages=stages, swz=swz, out=out_dt))
    p.add_in(A, dt)
    p.add_in(B, dt)
    tol = TOL[out_dt] if acc == "float32" else (4e-3, 4e-3)
    p.add_out(npy_io.round_to(Cp[:, :M, :N], out_dt), out_dt, tol)
    if colred:
        p.add_out(sref, "float32", (1e-4, 1e-4) if acc == "float32" else (4e-3, 4e-2))
    return p



# ---------------------------------------------------------------- GEMM with unusual block shapes / thread counts
def gen_gemmodd(R, rs, name):
    dt = R.choice(["float16", "bfloat16"])
    bM = R.choice([8, 24, 64, 192, 256, 128])
    bN = R.choice([8, 24, 40, 56, 256, 64, 112, 144])
    bK = R.choice([8, 16, 24, 40, 64, 128])
    tA, tB = R.random() < 0.3, R.random() < 0.5
    threads = R.choice([32, 96, 128, 256, 384, 512])
    if bM == 256 and threads == 512 and bN > 128:
        threads = 256
    # A float32 C of 256 x 256 fits only in registers, which not every thread count gives it; in shared
    # memory it is a (correct) user error, not a test.
    if bM * bN * 4 > 200 * 1024:
        bN = 144
    M = R.randint(max(1, bM // 2), bM * 2 + 3)
    N = R.randint(max(1, bN // 2), bN * 2 + 3)
    K = R.randint(8, 200)
    stages = R.choice([1, 2, 3, 4, 5, 6])
    while stages * (bM * bK + bK * bN) * 2 > 160000:
        stages -= 1
    nbx, nby, nk = cdiv(N, bN), cdiv(M, bM), cdiv(K, bK)
    a_shape = (K, M) if tA else (M, K)
    b_shape = (N, K) if tB else (K, N)
    # not warp_specialize=True: most of these shapes have no TMA-loadable copy, a user error on sm_90a
    ws = R.choice([None, False])
    L = ["import tilelang.language as T\n\n# %s\n" % name]
    L.append("@T.prim_func\ndef main(A: T.Tensor(%r, %r), B: T.Tensor(%r, %r), C: T.Tensor((%d, %d), 'float32')):\n" % (a_shape, dt, b_shape, dt, M, N))
    L.append("    with T.Kernel(%d, %d, threads=%d) as (bx, by):\n" % (nbx, nby, threads))
    I = "        "
    J = I + "    "
    L.append(I + "A_shared = T.alloc_shared(%r, %r)\n" % ((bK, bM) if tA else (bM, bK), dt))
    L.append(I + "B_shared = T.alloc_shared(%r, %r)\n" % ((bN, bK) if tB else (bK, bN), dt))
    L.append(I + "C_local = T.alloc_fragment((%d, %d), 'float32')\n" % (bM, bN))
    L.append(I + "T.clear(C_local)\n")
    L.append(I + "for k in T.Pipelined(%d, num_stages=%d%s):\n" % (nk, stages, "" if ws is None else ", warp_specialize=%r" % ws))
    L.append(J + ("T.copy(A[k * %d, by * %d], A_shared)\n" % (bK, bM) if tA else "T.copy(A[by * %d, k * %d], A_shared)\n" % (bM, bK)))
    L.append(J + ("T.copy(B[bx * %d, k * %d], B_shared)\n" % (bN, bK) if tB else "T.copy(B[k * %d, bx * %d], B_shared)\n" % (bK, bN)))
    L.append(J + "T.gemm(A_shared, B_shared, C_local, transpose_A=%r, transpose_B=%r)\n" % (tA, tB))
    L.append(I + "T.copy(C_local, C[by * %d, bx * %d])\n" % (bM, bN))
    A = vals(rs, a_shape, dt)
    B = vals(rs, b_shape, dt)
    C = (A.T if tA else A) @ (B.T if tB else B)
    p = Prog(name, "gemmodd", "".join(L), dict(dt=dt, bM=bM, bN=bN, bK=bK, M=M, N=N, K=K, tA=tA, tB=tB, threads=threads, stages=stages, ws=ws))
    p.add_in(A, dt)
    p.add_in(B, dt)
    p.add_out(C, "float32")
    return p


# name -> generator, in the order programs run (most valuable first, in case the time budget cuts the run)
FAMILIES = {"attention": gen_attn, "chain": gen_chain, "gemm8": gen_gemm8, "gemmx": gen_gemmx, "gemmodd": gen_gemmodd,
            "splitk": gen_splitk, "gemm": gen_gemm, "softmax": gen_softmax, "reduce": gen_reduce, "elem": gen_elem}
