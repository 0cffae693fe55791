"""Shamir secret sharing over GF(2^8) with the AES polynomial x^8+x^4+x^3+x+1 (0x11B).

Each byte of the secret is the constant term of its own random polynomial of degree k-1; share i is the
polynomial evaluated at x=i (1..255). This is the construction used by HashiCorp Vault and SLIP-0039,
so the arithmetic can be checked against those independent implementations.
"""

from __future__ import annotations

import secrets

_EXP = [0] * 510
_LOG = [0] * 256


def _build_tables() -> None:
    x = 1
    for i in range(255):
        _EXP[i] = x
        _LOG[x] = i
        # multiply by the generator 3: x*2 (xtime) xor x
        x2 = x << 1
        if x2 & 0x100:
            x2 ^= 0x11B
        x = x2 ^ x
    for i in range(255, 510):
        _EXP[i] = _EXP[i - 255]


_build_tables()


def gf_mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return _EXP[_LOG[a] + _LOG[b]]


def gf_div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero in GF(256)")
    if a == 0:
        return 0
    return _EXP[(_LOG[a] - _LOG[b]) % 255]


def _eval(coeffs: list[int], x: int) -> int:
    """Horner's rule; coeffs[0] is the constant term."""
    y = 0
    for c in reversed(coeffs):
        y = gf_mul(y, x) ^ c
    return y


def split(secret: bytes, threshold: int, count: int) -> list[tuple[int, bytes]]:
    """Split ``secret`` into ``count`` shares (x, y-bytes), any ``threshold`` of which recover it."""
    if not 1 <= threshold <= count <= 255:
        raise ValueError("need 1 <= threshold <= count <= 255")
    polys = [[b] + [secrets.randbelow(256) for _ in range(threshold - 1)] for b in secret]
    return [(x, bytes(_eval(p, x) for p in polys)) for x in range(1, count + 1)]


def interpolate(shares: list[tuple[int, bytes]], x: int = 0) -> bytes:
    """Lagrange interpolation of the shares' polynomials at ``x`` (0 recovers the secret)."""
    xs = [s[0] for s in shares]
    if len(set(xs)) != len(xs):
        raise ValueError("duplicate share index")
    length = len(shares[0][1])
    if any(len(s[1]) != length for s in shares):
        raise ValueError("shares have different lengths")
    out = bytearray(length)
    for i, (xi, yi) in enumerate(shares):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if i != j:
                num = gf_mul(num, x ^ xj)
                den = gf_mul(den, xi ^ xj)
        basis = gf_div(num, den)
        for k in range(length):
            out[k] ^= gf_mul(yi[k], basis)
    return bytes(out)


def combine(shares: list[tuple[int, bytes]]) -> bytes:
    return interpolate(shares, 0)
