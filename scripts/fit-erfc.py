#!/usr/bin/env python3
"""Fits the erf / erfc tables of src/ops/nn.cpp (needs mpmath: apt-get install python3-mpmath).

Interpolation at the n Chebyshev nodes (first kind) of u in [-1, 1], at 50 digits, converted from
the Chebyshev basis to monomials in u (nn.cpp evaluates them by Estrin's scheme):
  P(u) = erf(x) / x                    for |x| < 1,      u = 2 x^2 - 1
  Q(u) = ln(erfc(a) e^(a^2) / t)       for 0 <= a <= cap, t = 2 / (2 + a),
                                       u = (2 t - 1 - tcap) / (1 - tcap), tcap = 2 / (2 + cap)
Prints each table as C++ with its largest error on a fine grid (absolute: for Q that is erfc's
relative error). Usage: scripts/fit-erfc.py   (about a second)
"""
import mpmath as mp

mp.mp.dps = 50


def chebyshev_fit(f, n):
    """Monomial coefficients (lowest degree first) of the degree n-1 interpolant of f at the Chebyshev nodes."""
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    ys = [f(u) for u in nodes]
    c = [2 * mp.fsum(ys[k] * mp.cos(j * mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)) / n for j in range(n)]
    c[0] /= 2
    basis = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]  # T_j as monomials
    for j in range(2, n):
        nxt = [mp.mpf(0)] * (j + 1)
        for i, v in enumerate(basis[j - 1]):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(basis[j - 2]):
            nxt[i] -= v
        basis.append(nxt)
    m = [mp.mpf(0)] * n
    for j in range(n):
        for i, v in enumerate(basis[j]):
            m[i] += c[j] * v
    return m


def max_error(f, m, points=2000):
    err = mp.mpf(0)
    for k in range(points + 1):
        u = -1 + 2 * mp.mpf(k) / points
        err = max(err, abs(mp.fsum(mp.mpf(float(ci)) * u**i for i, ci in enumerate(m)) - f(u)))
    return err


def p_function(u):
    x = mp.sqrt((u + 1) / 2)
    return 2 / mp.sqrt(mp.pi) if x == 0 else mp.erf(x) / x


def q_function(cap):
    tcap = mp.mpf(2) / (2 + cap)

    def f(u):
        t = (u * (1 - tcap) + 1 + tcap) / 2
        a = 2 / t - 2
        return mp.log(mp.erfc(a) * mp.exp(a * a) / t)

    return f


def emit(name, f, n, what):
    m = chebyshev_fit(f, n)
    print(f"// {name}: {what}, {n} terms, largest error {mp.nstr(max_error(f, m), 3)}")
    print(f"constexpr std::array<double, {n}> {name} = {{" + ", ".join(repr(float(x)) for x in m) + "};")


if __name__ == "__main__":
    emit("kErfP64", p_function, 12, "erf(x) / x on |x| < 1")
    emit("kErfcQ64", q_function(mp.mpf(27)), 26, "erfc on [0, 27]")
    emit("kErfP32", p_function, 7, "erf(x) / x on |x| < 1")
    emit("kErfcQ32", q_function(mp.mpf(10)), 12, "erfc on [0, 10]")
