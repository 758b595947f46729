#!/usr/bin/env python3
"""Fits the coefficient tables of the CPU backend's inline float32 erf (llvm_ops.cc, erf_table_f32)
and prints them as C++ initializers.

erf(u), u = |x| clamped below 4, is split at the integers into 4 intervals k = floor(u). With
s = u - k (exact in float32):
  k = 0:  erf(u) = u + s Q_0(s),        Q_0 fits (erf(s) - s) / s
  k > 0:  erf(u) = c_k + s Q_k(s),      c_k = float32(erf(k)), Q_k fits (erf(k + s) - c_k) / s
so each result is one FMA onto a value that carries most of it (u, or c_k), which keeps the
rounding error of Q small in ulps of the result. Q_k has degree DEG; its coefficients are fitted
by Lawson-weighted least squares in float64 on Chebyshev nodes, weighting the error of s Q_k by
1 / ulp(erf), so the fit minimizes the maximum error in float32 ulps. The four values of each
coefficient form one 4-entry table, looked up with one in-lane permute (vpermilps) per coefficient
in the AVX2 code.

  .venv/bin/python backends/cpu/erf_table_fit.py [DEG]
"""
import math
import sys

import numpy as np

DEG = int(sys.argv[1]) if len(sys.argv) > 1 else 8
_erf = np.vectorize(math.erf)


def ulp32(y):
    return np.spacing(np.maximum(np.abs(y), 2.0**-126).astype(np.float32)).astype(np.float64)


def fit(k, deg, nodes=600, rounds=100):
    j = np.arange(nodes)
    s = (np.cos((2 * j + 1) * np.pi / (2 * nodes)) * 0.5 + 0.5)  # Chebyshev nodes on (0, 1)
    u = k + s
    c0 = 0.0 if k == 0 else float(np.float32(math.erf(k)))
    base = u if k == 0 else c0
    target = (_erf(u) - base) / s
    w = s / ulp32(_erf(u))  # error of s Q in ulps of erf
    v = np.vander(s, deg + 1, increasing=True)
    lawson = np.ones(nodes)
    for _ in range(rounds):
        sw = w * np.sqrt(lawson)
        q = np.linalg.lstsq(v * sw[:, None], target * sw, rcond=None)[0]
        err = np.abs(v @ q - target) * w
        lawson *= err
        lawson /= lawson.sum()
    return c0, q, err.max()


def main():
    rows = [fit(k, DEG) for k in range(4)]
    for k, (_, _, e) in enumerate(rows):
        print(f"// k = {k}: fit error {e:.3f} ulp before float32 rounding", file=sys.stderr)
    fmt = lambda v: f"{float(np.float32(v)):.9g}"
    print("c: {" + ", ".join(fmt(c0) for c0, _, _ in rows) + "}")
    for i in range(DEG, -1, -1):  # highest degree first, the order of Horner's rule
        print(f"q{i}: {{" + ", ".join(fmt(q[i]) for _, q, _ in rows) + "}")


if __name__ == "__main__":
    main()
