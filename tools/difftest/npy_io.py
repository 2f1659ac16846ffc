"""Reads and writes .npy files in the formats tl uses, bfloat16 and float8 included (named descrs
bfloat16, float8_e4m3fn, float8_e5m2), without ml_dtypes; rounds float64 values to those formats.
A library module of tools/difftest (difftest.py runs the tool)."""
import ast, struct
import numpy as np

NATIVE = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8",
          "int8": "|i1", "uint8": "|u1", "bool": "|b1"}
NAMED = {"bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def _float8_table(exp_bits, man_bits, ieee_specials):
    """The value of each byte of a float8 format: e5m2 keeps IEEE's inf and NaNs (ieee_specials);
    e4m3 ("fn") has no inf and one NaN per sign, its top exponent's largest mantissa."""
    bias, top, steps = 2 ** (exp_bits - 1) - 1, 2 ** exp_bits - 1, 2 ** man_bits
    vals = np.zeros(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> man_bits) & top, c & (steps - 1)
        if ieee_specials and e == top:
            v = np.inf if m == 0 else np.nan
        elif not ieee_specials and e == top and m == steps - 1:
            v = np.nan
        elif e == 0:
            v = m / steps * 2.0 ** (1 - bias)
        else:
            v = (1 + m / steps) * 2.0 ** (e - bias)
        vals[c] = -v if s else v
    return vals


E4M3 = _float8_table(4, 3, False)
E5M2 = _float8_table(5, 2, True)


def round_bf16(x):
    """float64 -> the nearest bfloat16 (ties to even), rounded once: through float32 an integer past
    2^24 or a float64 would be rounded twice."""
    x = np.asarray(x, dtype=np.float64)
    mant, exp = np.frexp(x)  # x = mant * 2^exp, 0.5 <= |mant| < 1: bfloat16 keeps 8 bits of mant
    r = np.ldexp(np.round(mant * 256.0), exp - 8)  # np.round: half to even
    r = np.where(np.abs(r) > 3.3895313892515355e38, np.copysign(np.inf, x), r)  # past bfloat16's largest finite
    return np.where(np.isfinite(x), r, x)


def _round_table(x, table, maxv, sat):
    x = np.asarray(x, dtype=np.float64)
    pos = np.array(sorted(set(v for v in table[:128] if np.isfinite(v))))
    a = np.abs(x)
    if sat:
        a = np.minimum(a, maxv)
    idx = np.clip(np.searchsorted(pos, a), 1, len(pos) - 1)
    lo, hi = pos[idx - 1], pos[idx]
    r = np.where(a - lo < hi - a, lo, hi)
    tie = (a - lo) == (hi - a)
    # tie: even code (codes ascend with value for positive numbers)
    lo_code = np.searchsorted(pos, lo)
    r = np.where(tie, np.where(lo_code % 2 == 0, lo, hi), r)
    if not sat:  # IEEE overflow: from half a step past the largest finite value (its own step: pos[-1] - pos[-2])
        r = np.where(a >= maxv + (pos[-1] - pos[-2]) / 2, np.inf, r)
    return np.sign(x) * r


def round_to(x, dt):
    x = np.asarray(x, dtype=np.float64)
    if dt == "float32":
        return x.astype(np.float32).astype(np.float64)
    if dt == "float16":
        with np.errstate(over="ignore"):  # past float16's range is inf, as intended
            return x.astype(np.float16).astype(np.float64)
    if dt == "bfloat16":
        return round_bf16(x)
    if dt == "float8_e4m3":
        return _round_table(x, E4M3, 448.0, True)
    if dt == "float8_e5m2":
        return _round_table(x, E5M2, 57344.0, False)
    if dt in ("int32", "int8", "uint8", "int64"):
        return np.trunc(x)
    return x


def encode(x, dt):
    """float64 values (already representable) -> raw numpy array + descr"""
    x = np.asarray(x)
    if dt in NATIVE:
        return np.ascontiguousarray(x.astype(NATIVE[dt])), NATIVE[dt]
    if dt == "bfloat16":
        b = (round_bf16(x).astype(np.float32).view(np.uint32) >> 16).astype("<u2")
        return b, "bfloat16"
    table = E4M3 if dt == "float8_e4m3" else E5M2
    codes = np.zeros(x.shape, dtype=np.uint8)
    flat = x.reshape(-1)
    lut = {}
    for c in range(256):
        v = table[c]
        if np.isfinite(v) and v not in lut:
            lut[v] = c
    codes.reshape(-1)[:] = [lut[float(v)] for v in flat]
    return codes, NAMED[dt]


def save(path, x, dt):
    raw, descr = encode(x, dt)
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(int(s) for s in raw.shape)))
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(raw.tobytes())


def load(path):
    """-> float64 (or int64) numpy array"""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    if major == 1:
        hl = struct.unpack("<H", data[8:10])[0]; off = 10
    else:
        hl = struct.unpack("<I", data[8:12])[0]; off = 12
    h = ast.literal_eval(data[off:off + hl].decode("latin1"))
    body = data[off + hl:]
    d, shape = h["descr"], tuple(h["shape"])
    if d == "bfloat16":
        u = np.frombuffer(body, dtype="<u2").astype(np.uint32) << 16
        a = u.view(np.float32).astype(np.float64)
    elif d == "float8_e4m3fn":
        a = E4M3[np.frombuffer(body, dtype=np.uint8)]
    elif d == "float8_e5m2":
        a = E5M2[np.frombuffer(body, dtype=np.uint8)]
    else:
        a = np.frombuffer(body, dtype=np.dtype(d))
        a = a.astype(np.int64) if a.dtype.kind in "iub" else a.astype(np.float64)
    n = int(np.prod(shape)) if shape else 1
    a = a[:n].reshape(shape)
    if h.get("fortran_order"):
        a = np.asarray(a.reshape(shape[::-1]).T)
    return a
