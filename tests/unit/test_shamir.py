"""Shamir over GF(256), checked against SLIP-0039's reference implementation (shamir-mnemonic)."""

from __future__ import annotations

import itertools
import os

import pytest
from shamir_mnemonic.shamir import RawShare, _interpolate

from drtool.crypto import shamir


def test_gf256_multiplication_matches_aes_field() -> None:
    # FIPS-197 §4.2: {57} • {83} = {c1}, {57} • {13} = {fe}
    assert shamir.gf_mul(0x57, 0x83) == 0xC1
    assert shamir.gf_mul(0x57, 0x13) == 0xFE
    for a in range(1, 256):
        assert shamir.gf_mul(a, shamir.gf_div(1, a)) == 1


@pytest.mark.parametrize(("k", "n"), [(1, 1), (2, 3), (3, 5), (5, 5), (4, 10)])
def test_every_threshold_subset_recovers(k: int, n: int) -> None:
    secret = os.urandom(32)
    shares = shamir.split(secret, k, n)
    for subset in itertools.combinations(shares, k):
        assert shamir.combine(list(subset)) == secret


def test_independent_implementation_agrees() -> None:
    """Our shares interpolate to the secret in SatoshiLabs' SLIP-39 GF(256) code, and vice versa."""
    for _ in range(20):
        secret = os.urandom(32)
        shares = shamir.split(secret, 3, 5)
        assert _interpolate([RawShare(x, y) for x, y in shares[1:4]], 0) == secret
        # points on their polynomial evaluated by their code recover with ours
        theirs = [RawShare(x, _interpolate([RawShare(a, b) for a, b in shares[:3]], x)) for x in (7, 9, 200)]
        assert shamir.combine([(s.x, s.data) for s in theirs]) == secret


def test_fewer_shares_than_threshold_reveal_nothing_useful() -> None:
    secret = os.urandom(16)
    shares = shamir.split(secret, 3, 5)
    assert shamir.combine(shares[:2]) != secret


def test_duplicate_share_rejected() -> None:
    shares = shamir.split(b"x" * 8, 2, 3)
    with pytest.raises(ValueError):
        shamir.combine([shares[0], shares[0]])
