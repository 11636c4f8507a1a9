#!/usr/bin/env python3
"""The coefficients of zc_erff (src/codegen/backends/cpp/prelude.h), fitted here.

erf(x) for |x| < 1 is x * P(x^2), P of degree 5; for 1 <= |x| < 4 it is
1 - exp(-x^2) * Q(1/|x|), Q of degree 8 fitting erfc(x) * exp(x^2); from 4 on, erf is 1 in
float. Each is a least-squares fit of the relative error on Chebyshev nodes, in double (max
relative error 4.4e-8 and 7.2e-8). Prints them as the prelude writes them, highest degree first.
"""
from math import erf, erfc, exp

import numpy as np


def nodes(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit(x, y, variable, degree):
    v = np.vander(variable, degree + 1, increasing=True)
    c, *_ = np.linalg.lstsq(v / y[:, None], np.ones_like(y), rcond=None)  # relative error
    return c


def main():
    x = nodes(1e-6, 1.0, 400)
    p = fit(x, np.array([erf(v) / v for v in x]), x * x, 5)
    x = nodes(1.0, 4.0, 600)
    q = fit(x, np.array([erfc(v) * exp(v * v) for v in x]), 1 / x, 8)
    for name, c in (("P", p), ("Q", q)):
        print(name + ": " + ", ".join("%.9ef" % v for v in c[::-1]))


if __name__ == "__main__":
    main()
