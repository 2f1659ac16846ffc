# FlashAttention forward as a tile program: each block owns block_M queries of one head, streams
# keys and values in block_N tiles, and keeps a running row max and row sum so the softmax never
# materializes (online softmax). Scores use exp2 with log2(e) folded into the scale. `threads`: a
# warpgroup (128) per 64 query rows of the block.
#
# pipelined_softmax: the FA3 schedule (T.Pipelined's order/stage/group, docs/language.md 4.4). The
# loop at step k rescales O for the step before, issues S_k = Q K_k^T and O += P_{k-1} V_{k-1}, then
# runs the softmax of S_k: on sm_90a the exp2 work overlaps the P V gemm on the tensor cores (the
# compiler waits for S_k alone, and for the P V gemm only before P is overwritten).
#
# On sm_90a P (acc_s_cast) stays in registers and feeds the P V gemm from there (wgmma's register
# A operand). dtype float8_e4m3 / float8_e5m2: Q, K, V and P in 8 bits (P's probabilities in [0, 1]
# keep e4m3's relative step of 2^-4), O in bfloat16; V comes transposed, [batch, heads, dim,
# seq_len], as 8-bit tensor-core operands are K-major. e4m3 at head dim 128 on the H200: 762 TFLOPS
# non-causal, 626 causal (1.11x / 1.13x this program in bf16; docs/perf.md, stop 34), without the
# FA3 schedule, which is the default for 16-bit dtypes only (pipelined_softmax=None).
#
# The default tiling is the fastest measured on the H200 (docs/perf.md, attention runs 15 and 17):
# up to head dim 128, block_M = block_N = 128 on two consumer warpgroups (threads=256):
# 681-714 TFLOPS non-causal, 551-640 causal at head dim 128, 1.05-1.15x torch's cuDNN backend; 64 x
# 64 on one (two blocks an SM) reaches 584-612 / 474-522. Above head dim 128 it is 64 x 64: at 256,
# 128 x 128 tiles with P in registers need more than the 255 registers a thread has.
#
#   tl run examples/flash_attention.py --param batch=1 --param heads=4 --param seq_len=256 --param dim=64 \
#       --in q.npy --in k.npy --in v.npy --out o.npy
import tilelang
import tilelang.language as T


def flash_attention(batch, heads, seq_len, dim, is_causal=False, block_M=None, block_N=None, dtype="bfloat16", warp_specialize=None, threads=None, pipelined_softmax=None):
    # The default tiling (see above); threads: a warpgroup per 64 query rows.
    block_M = (128 if dim <= 128 else 64) if block_M is None else block_M
    block_N = (128 if dim <= 128 else 64) if block_N is None else block_N
    threads = 128 * (block_M // 64) if threads is None else threads
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(dim) * log2(e)
    shape = (batch, seq_len, heads, dim)
    accum = "float32"
    eight_bit = dtype in ("float8_e4m3", "float8_e5m2")
    v_shape = (batch, heads, dim, seq_len) if eight_bit else shape
    pipelined_softmax = not eight_bit if pipelined_softmax is None else pipelined_softmax

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(v_shape, dtype), Output: T.Tensor(shape, "bfloat16" if eight_bit else dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((dim, block_N) if eight_bit else (block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            scores_max = T.alloc_fragment((block_M,), accum)
            scores_max_prev = T.alloc_fragment((block_M,), accum)
            scores_scale = T.alloc_fragment((block_M,), accum)
            scores_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = T.ceildiv((bx + 1) * block_M, block_N) if is_causal else T.ceildiv(seq_len, block_N)

            # The statements' groups (indices below), their places in the scheduled body and their
            # stages: the copies (-1) are the pipeline's; the rescale of O and the P V gemm run a step
            # late. The rescale goes first: on sm_90a nothing may touch O's registers between the
            # issue of Q K^T and the wait for it (ptxas would serialize the gemms).
            order = [-1, 1, 3, 0, -1, 2] if pipelined_softmax else None
            stage = [-1, 0, 0, 1, -1, 1] if pipelined_softmax else None
            group = [[0], [1, 2], [3, 4, 5, 6, 7, 8, 9], [10], [11], [12]] if pipelined_softmax else None
            # sm_90a: K and V arrive through a producer warpgroup (warp_specialize=False: no producer).
            for k in T.Pipelined(loop_range, num_stages=2, warp_specialize=warp_specialize, order=order, stage=stage, group=group):
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                # Masked scores start at -inf: future keys (causal) and keys past the sequence's end.
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                    else:
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)

                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]

                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                if eight_bit:
                    T.copy(V[bz, by, :, k * block_N : (k + 1) * block_N], V_shared)
                else:
                    T.copy(V[bz, k * block_N : (k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, transpose_B=eight_bit)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return main
