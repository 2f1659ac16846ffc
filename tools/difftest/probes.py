"""The hand-written probe family of tools/difftest ("hand"): tile programs in probes/*.py (and the
repository's examples/gemm.py) covering constructs the random families do not, each with inputs and a
NumPy reference built here, as families.Prog. A library module of tools/difftest (difftest.py runs the tool)."""
import os
import numpy as np
import npy_io
from families import Prog, vals, pad2

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE_GEMM = os.path.join(HERE, "..", "..", "examples", "gemm.py")


def probe_source(name):
    with open(os.path.join(HERE, "probes", name + ".py")) as f:
        return f.read()


def p1(rs):
    src = probe_source("p1")
    A = vals(rs, (100, 96), "bfloat16"); B = vals(rs, (96, 72), "bfloat16")
    Cp = pad2(A, 128, 96) @ pad2(B, 96, 128)
    t = Cp.reshape(2, 64, 2, 64)
    m = np.abs(t).max(axis=3, keepdims=True)
    t = t / np.maximum(m, 1.0)
    C = npy_io.round_to(t.reshape(128, 128)[:100, :72], "bfloat16")
    S = t.sum(axis=(0, 1)).reshape(-1)[:72]
    p = Prog("hand_p1", "hand", src, dict(what="two pipelined loops (start/stop), absmax row reduce, col reduce, bf16 atomic_add"))
    p.add_in(A, "bfloat16"); p.add_in(B, "bfloat16")
    p.add_in(np.zeros(72), "bfloat16", "inout")
    p.inout_refs[2] = (S, "bfloat16", 2e-2, 5e-2)
    p.add_out(C, "bfloat16")
    return p


def gemm_probe(name, what, scale):
    def f(rs):
        src = probe_source(name)
        A = vals(rs, (130, 200), "float16"); B = vals(rs, (200, 96), "float16")
        p = Prog("hand_" + name, "hand", src, dict(what=what))
        p.add_in(A, "float16"); p.add_in(B, "float16")
        p.add_out(A @ B * scale, "float32")
        return p
    return f

p2 = gemm_probe("p2", "scheduled loop, gemm one stage late (stage=[-1,-1,1])", 1.0)
p3 = gemm_probe("p3", "scheduled loop: gemm into S then acc += S*0.5 a stage late", 0.5)

def p4(rs):
    A = vals(rs, (100, 128), "int8"); B = rs.randint(0, 9, (72, 128)).astype(np.float64)
    C = A @ B.T + 3
    Cp = pad2(A, 128, 128) @ pad2(B, 128, 128).T + 3
    R = Cp.reshape(128, 2, 64).max(axis=2).T[:, :100]
    p = Prog("hand_p4", "hand", probe_source("p4"), dict(what="int8 x uint8 wgmma gemm, fill(3) accumulator, int32 row max"))
    p.add_in(A, "int8"); p.add_in(B, "uint8")
    p.add_out(C, "int32"); p.add_out(R, "int32")
    return p

def p5(rs):
    A = vals(rs, (2, 96, 64), "float8_e4m3"); B = vals(rs, (2, 80, 64), "float8_e5m2")
    C = npy_io.round_to(np.einsum("bmk,bnk->bmn", A, B) * 0.125, "float8_e4m3")
    p = Prog("hand_p5", "hand", probe_source("p5"), dict(what="e4m3 x e5m2 gemm, 3-D grid + swizzle, e4m3 output"))
    p.add_in(A, "float8_e4m3"); p.add_in(B, "float8_e5m2")
    p.add_out(C, "float8_e4m3", (0.07, 0.02))
    return p

def p6(rs):
    A = vals(rs, (64, 64), "bfloat16"); B = vals(rs, (64, 64), "bfloat16"); C = vals(rs, (64, 64), "bfloat16")
    P = npy_io.round_to(A @ B.T, "bfloat16")
    O = npy_io.round_to(P.T @ C + P @ C, "bfloat16")
    p = Prog("hand_p6", "hand", probe_source("p6"), dict(what="bf16 P fragment read transposed and plain by two gemms into one accumulator"))
    for x in (A, B, C): p.add_in(x, "bfloat16")
    p.add_out(O, "bfloat16")
    return p

def p7_mk(M, N, K, tag):
    def f(rs):
        A = vals(rs, (M, K), "float16"); B = vals(rs, (N, K), "float16")
        C = npy_io.round_to(np.maximum(A @ B.T, 0) * 0.5, "float16")
        p = Prog("hand_p7_" + tag, "hand", probe_source("p7"), dict(what="symbolic M,N,K gemm (cp.async path) %dx%dx%d" % (M, N, K)))
        p.add_in(A, "float16"); p.add_in(B, "float16")
        p.add_out(C, "float16")
        return p
    return f

def p8_mk(M, tag):
    def f(rs):
        X = vals(rs, (M, 90), "bfloat16") * 4
        e = np.exp(X - X.max(axis=1, keepdims=True))
        Y = npy_io.round_to(e / e.sum(axis=1, keepdims=True), "bfloat16")
        p = Prog("hand_p8_" + tag, "hand", probe_source("p8"), dict(what="symbolic-M masked softmax M=%d" % M))
        p.add_in(X, "bfloat16")
        p.add_out(Y, "bfloat16", (1.6e-2, 1e-4))
        return p
    return f

def p9(rs):
    A = vals(rs, (70, 50), "float32"); B = vals(rs, (50, 40), "float32")
    A2 = vals(rs, (70, 64), "bfloat16"); B2 = vals(rs, (64, 40), "bfloat16")
    C = A @ B
    D = npy_io.round_to(A2[:, :32] @ B2[:32], "bfloat16")
    D = npy_io.round_to(D + A2[:, 32:] @ B2[32:], "bfloat16")
    p = Prog("hand_p9", "hand", probe_source("p9"), dict(what="float32 operand gemm (cooperative), bf16 accumulator rounded per call, threads=(32,2)"))
    p.add_in(A, "float32"); p.add_in(B, "float32"); p.add_in(A2, "bfloat16"); p.add_in(B2, "bfloat16")
    p.add_out(C, "float32"); p.add_out(D, "bfloat16")
    return p

def p10_mk(M, N, K, tag, bN=64, threads=256, stages=3, panel=8):
    def f(rs):
        with open(EXAMPLE_GEMM) as f:
            src = f.read()
        src = src.replace("def matmul(M, N, K, block_M=128, block_N=256, block_K=64, dtype=\"float16\", accum_dtype=\"float\", threads=256, num_stages=3, panel=8, warp_specialize=None)",
                          "def matmul(M=%d, N=%d, K=%d, block_M=128, block_N=%d, block_K=64, dtype=\"bfloat16\", accum_dtype=\"float\", threads=%d, num_stages=%d, panel=%d, warp_specialize=None)" % (M, N, K, bN, threads, stages, panel))
        assert "M=%d" % M in src
        A = (rs.random_sample((M, K)) < 0.1) * 1.0
        B = (rs.random_sample((K, N)) < 0.1) * 1.0
        p = Prog("hand_p10_" + tag, "hand", src, dict(what="examples/gemm.py persistent warp-specialized, TMA-store epilogue, several rounds: %dx%dx%d bN=%d" % (M, N, K, bN)))
        p.add_in(A, "bfloat16"); p.add_in(B, "bfloat16")
        p.add_out(A @ B, "bfloat16")
        return p
    return f

def p11(rs):
    A = vals(rs, (192, 256), "float16") ; B = vals(rs, (128, 256), "float8_e4m3")
    Aq = npy_io.round_to(A * 2.0, "float8_e4m3")
    p = Prog("hand_p11", "hand", probe_source("p11"), dict(what="f16 -> f32 fragment -> e4m3 shared written by threads, then 8-bit wgmma (warp-specialized TMA for B)"))
    p.add_in(A, "float16"); p.add_in(B, "float8_e4m3")
    p.add_out(Aq @ B.T, "float32")
    return p

def p12(rs):
    A = vals(rs, (256, 128), "bfloat16"); B = vals(rs, (128, 128), "bfloat16")
    C = A @ B
    R = C.reshape(256, 2, 64).sum(axis=2)
    p = Prog("hand_p12", "hand", probe_source("p12"), dict(what="warp-specialized gemm then thread-level per-thread row sums with sync_threads (named barrier)"))
    p.add_in(A, "bfloat16"); p.add_in(B, "bfloat16")
    p.add_out(C, "float32"); p.add_out(R, "float32")
    return p

# the probes in the order they run
PROBES = [p1, p2, p3, p4, p5, p6, p7_mk(100, 72, 40, 'a'), p7_mk(64, 64, 64, 'b'), p7_mk(1, 130, 8, 'c'), p7_mk(129, 3, 200, 'd'),
          p7_mk(50, 70, 37, 'e'), p7_mk(65, 9, 99, 'f'), p8_mk(1, 'a'), p8_mk(77, 'b'), p9, p10_mk(1280, 1920, 192, 'a'),
          p10_mk(1270, 1900, 200, 'b'), p10_mk(1024, 2048, 128, 'c', bN=256, stages=4), p11, p12]
