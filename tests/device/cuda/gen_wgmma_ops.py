#!/usr/bin/env python3
"""Writes device/include/tl/device/cuda/wgmma_ops.h: one inline-PTX wrapper per wgmma N and input kind.

wgmma.mma_async names every accumulator register in its operand list, so each N needs its own asm
statement (N/2 "+f" operands for an FP32 accumulator). Writing them by hand invites typos; this
script is the single source. Run from the repository root:
    python3 tests/device/cuda/gen_wgmma_ops.py            # rewrite the header
    python3 tests/device/cuda/gen_wgmma_ops.py --check    # exit 1 if the header is stale
"""
import sys
from pathlib import Path

OUT = Path("device/include/tl/device/cuda/wgmma_ops.h")
# The N we instantiate. Float inputs (16-bit, and 8-bit floats at k32) take any multiple of 8 up to
# 256; 8-bit integers only these (ptxas: "Illegal matrix shape '.m64n56k32' ... with integer types").
NS = [8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]
# And for float inputs every other multiple of 8: DeepGEMM's kernel issues one wgmma as wide as its
# tile, and its tiles may be any multiple of 8 wide (56 columns: 7168 = 128 tiles, one an SM where
# 64 columns leave 20 of 132 idle; 176: 2112 = 12 tiles).
NS_FLOAT_ONLY = [n for n in range(8, 257, 8) if n not in NS]


def sizes(kind):
    return NS if kind == "int8" else sorted(NS + NS_FLOAT_ONLY)


def accumulator_operands(r, reg="f"):
    """The asm text naming r accumulator registers (%0 .. %r-1, braced) and their "+f" (or "+r")
    constraints."""
    regs = ["%" + str(i) for i in range(r)]
    reg_lines = ['      "' + ("{" if i == 0 else "") + ", ".join(regs[i:i + 16]) + ("}, " if i + 16 >= r else ", ") + '"'
                 for i in range(0, r, 16)]
    outs = ['"+' + reg + '"(d[' + str(i) + '])' for i in range(r)]
    return reg_lines, [", ".join(outs[i:i + 8]) for i in range(0, r, 8)]


def eight_bit_dispatch(kind, macro_name):
    """The template head and body that pick an 8-bit wrapper's PTX types from its two flags (A and B
    each e5m2 or e4m3, or each unsigned or signed)."""
    flag, yes, no = ("E5M2", "e5m2", "e4m3") if kind == "fp8" else ("Unsigned", "u8", "s8")
    head = "  template <bool kA%s, bool kB%s>\n" % (flag, flag)
    body = ""
    for i, (fa, fb) in enumerate(((True, True), (True, False), (False, True), (False, False))):
        cond = "kA%s && kB%s" % (flag, flag) if i == 0 else "kA%s" % flag if i == 1 else "kB%s" % flag
        call = '%s("%s", "%s");\n' % (macro_name, yes if fa else no, yes if fb else no)
        body += ("    if constexpr (%s) " % cond if i == 0 else "    else if constexpr (%s) " % cond if i < 3 else "    else ") + call
    return head, body


def gen_ss(n, kind):
    """One wrapper: m64nNk16 for 16-bit inputs (with transpose operands), or m64nNk32 for 8-bit inputs
    (K-major only: 8-bit wgmma has no transposed operands) -- floats (e4m3/e5m2, A and B each either)
    into FP32, integers (s8/u8, A and B each either) into s32 (wrapping; no scale operands)."""
    r = n // 2  # accumulator registers per thread
    a, b, s = r, r + 1, r + 2
    name, k, dtype, reg = {"16bit": ("WgmmaSsF32", 16, "f32", "f"), "fp8": ("WgmmaSsF32Fp8", 32, "f32", "f"),
                           "int8": ("WgmmaSsS32Int8", 32, "s32", "r")}[kind]
    macro_name = "TL_WGMMA_SS_%s_N%d" % ({"16bit": "F32", "fp8": "F32_FP8", "int8": "S32_INT8"}[kind], n)
    reg_lines, out_lines = accumulator_operands(r, reg)
    if kind == "16bit":
        operands = '      "%%%d, %%%d, p, 1, 1, %%%d, %%%d;\\n}\\n"' % (a, b, r + 3, r + 4)
        inputs = '      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB))'
        types = '" TY "." TY "'
        params = "TY"
    else:
        operands = ('      "%%%d, %%%d, p, 1, 1;\\n}\\n"' if kind == "fp8" else '      "%%%d, %%%d, p;\\n}\\n"') % (a, b)
        inputs = '      : "l"(desc_a), "l"(desc_b), "r"(scale_d))'
        types = '" TA "." TB "'
        params = "TA, TB"
    lines = [
        "#define %s(%s)" % (macro_name, params),
        "  asm volatile(",
        '      "{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n"' % s,
        '      "wgmma.mma_async.sync.aligned.m64n%dk%d.%s.%s "' % (n, k, dtype, types),
        *reg_lines,
        operands,
        "      : " + (",\n        ".join(out_lines)),
        inputs,
    ]
    macro = " \\\n".join("\n".join(lines).split("\n")) + "\n"
    if kind == "16bit":
        head = "  template <bool kBf16, int kTransA, int kTransB>\n"
        body = ('    if constexpr (kBf16) %s("bf16");\n' % macro_name + '    else %s("f16");\n' % macro_name)
    else:
        head, body = eight_bit_dispatch(kind, macro_name)
    ctype = "int32_t" if kind == "int8" else "float"
    spec = (
        "template <>\n"
        "struct %s<%d> {\n" % (name, n) +
        head +
        "  TL_DEVICE static void run(uint64_t desc_a, uint64_t desc_b, %s (&d)[%d], uint32_t scale_d) {\n" % (ctype, r) +
        body +
        "  }\n"
        "};\n"
        "#undef %s\n" % macro_name
    )
    return macro + spec


def gen_rs(n, kind):
    """One wrapper with A from registers (four 32-bit registers of the thread's A fragment; B from
    shared memory): m64nNk16 for 16-bit inputs (two elements a register; B alone may be transposed),
    or m64nNk32 for 8-bit inputs (four elements a register; K-major B), floats into FP32 and
    integers into s32 as in gen_ss."""
    r = n // 2
    a, b, s = r, r + 4, r + 5
    name, k, dtype, reg = {"16bit": ("WgmmaRsF32", 16, "f32", "f"), "fp8": ("WgmmaRsF32Fp8", 32, "f32", "f"),
                           "int8": ("WgmmaRsS32Int8", 32, "s32", "r")}[kind]
    macro_name = "TL_WGMMA_RS_%s_N%d" % ({"16bit": "F32", "fp8": "F32_FP8", "int8": "S32_INT8"}[kind], n)
    reg_lines, out_lines = accumulator_operands(r, reg)
    a_regs = "{%%%d, %%%d, %%%d, %%%d}, %%%d, p" % (a, a + 1, a + 2, a + 3, b)
    if kind == "16bit":
        tail, extra, types, params = ", 1, 1, %%%d" % (s + 1), ', "n"(kTransB)', '" TY "." TY "', "TY"
    else:
        tail, extra, types, params = ", 1, 1" if kind == "fp8" else "", "", '" TA "." TB "', "TA, TB"
    lines = [
        "#define %s(%s)" % (macro_name, params),
        "  asm volatile(",
        '      "{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n"' % s,
        '      "wgmma.mma_async.sync.aligned.m64n%dk%d.%s.%s "' % (n, k, dtype, types),
        *reg_lines,
        '      "%s%s;\\n}\\n"' % (a_regs, tail),
        "      : " + (",\n        ".join(out_lines)),
        '      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)%s)' % extra,
    ]
    macro = " \\\n".join("\n".join(lines).split("\n")) + "\n"
    ctype = "int32_t" if kind == "int8" else "float"
    if kind == "16bit":
        head = "  template <bool kBf16, int kTransB>\n"
        body = ('    if constexpr (kBf16) %s("bf16");\n' % macro_name + '    else %s("f16");\n' % macro_name)
    else:
        head, body = eight_bit_dispatch(kind, macro_name)
    spec = (
        "template <>\n"
        "struct %s<%d> {\n" % (name, n) +
        head +
        "  TL_DEVICE static void run(const uint32_t (&a)[4], uint64_t desc_b, %s (&d)[%d], uint32_t scale_d) {\n" % (ctype, r) +
        body +
        "  }\n"
        "};\n"
        "#undef %s\n" % macro_name
    )
    return macro + spec


def generate():
    parts = [
        "// GENERATED by tests/device/cuda/gen_wgmma_ops.py -- do not edit by hand.\n"
        "//\n"
        "// Raw wgmma.mma_async wrappers, A and B from shared memory (descriptors): m64nNk16 for BF16/FP16\n"
        "// inputs into FP32 (WgmmaSsF32); m64nNk32 for FP8 inputs, e4m3 or e5m2 each, into FP32\n"
        "// (WgmmaSsF32Fp8) and for 8-bit integers, signed or unsigned each, into s32 (WgmmaSsS32Int8), both\n"
        "// K-major operands only; the same with A from registers (WgmmaRsF32, WgmmaRsF32Fp8, WgmmaRsS32Int8:\n"
        "// the four 32-bit registers of a thread's A fragment, B from shared memory). Use them through\n"
        "// tl/device/cuda/wgmma.h.\n"
        "//   d       : the N/2 accumulator registers of this thread (fragment layout in wgmma.h)\n"
        "//   scale_d : 0 -> D = A*B, otherwise D = A*B + D\n"
        "//   kTransA / kTransB : 0 = K-major, 1 = MN-major (transposed) operand in shared memory (16-bit)\n"
        "#pragma once\n\n"
        '#include "tl/device/cuda/arch.h"\n\n'
        "namespace tl::cuda::detail {\n\n"
        "// Sizes with a specialization: " + ", ".join(map(str, sizes("16bit"))) + " (8-bit integers: not " +
        ", ".join(map(str, NS_FLOAT_ONLY)) + ").\n"
        "template <int N>\n"
        "struct WgmmaSsF32;\n"
        "template <int N>\n"
        "struct WgmmaSsF32Fp8;\n"
        "template <int N>\n"
        "struct WgmmaSsS32Int8;\n"
        "template <int N>\n"
        "struct WgmmaRsF32;\n"
        "template <int N>\n"
        "struct WgmmaRsF32Fp8;\n"
        "template <int N>\n"
        "struct WgmmaRsS32Int8;\n\n"
    ]
    for kind in ("16bit", "fp8", "int8"):
        for n in sizes(kind):
            parts.append(gen_ss(n, kind) + "\n")
    for kind in ("16bit", "fp8", "int8"):
        for n in sizes(kind):
            parts.append(gen_rs(n, kind) + "\n")
    parts.append("}  // namespace tl::cuda::detail\n")
    return "".join(parts)


def main():
    text = generate()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python3 {sys.argv[0]}")
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
