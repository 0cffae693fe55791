"""Cryptography: the master key (AEAD + keyed ids), key slots that wrap it, and Shamir recovery shares.

Everything that touches key material lives here; the repository layer above only sees a ``MasterKey``.
"""
