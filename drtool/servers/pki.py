"""A small certificate authority for the lab: TLS for etcd, kube-apiserver (and its clients) and others.

Real servers in the lab run with real TLS (mutual TLS for etcd clients), so the code paths that load CA
bundles and client certificates are exercised the way they are in production. Keys are ECDSA P-256:
generated in milliseconds, accepted by Go (etcd, Kubernetes) and OpenSSL alike. Private keys are written
with mode 0600 because the lab's state folder may be readable by other users of the machine.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_SANS: tuple[str, ...] = ("127.0.0.1", "localhost")
_SKEW = dt.timedelta(hours=1)  # tolerate small clock differences between the lab and its clients


@dataclasses.dataclass(frozen=True)
class CertFiles:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


@dataclasses.dataclass(frozen=True)
class CA(CertFiles):
    """A CA's PEM files; ``issue`` signs leaf certificates with it."""

    def load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        key = serialization.load_pem_private_key(self.key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{self.key} is not an EC private key")
        return cert, key


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with ``mode`` from the first byte on (no window where a key is world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a secret file (a key, a kubeconfig, an encryption config) readable by its owner only."""
    _write(Path(path), data, 0o600)


def _save(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertFiles:
    files = CertFiles(directory / f"{name}.crt", directory / f"{name}.key")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write(files.key, key_pem, 0o600)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def _name(cn: str, organizations: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(entries: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for entry in entries:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(entry)))
        except ValueError:
            names.append(x509.DNSName(entry))
    return x509.SubjectAlternativeName(names)


def make_ca(directory: str | os.PathLike[str], cn: str, *, days: int = 3650) -> CA:
    """Create ``ca.crt``/``ca.key`` in ``directory``, or return the CA already there (lab restarts reuse it)."""
    directory = Path(directory)
    ca = CA(directory / "ca.crt", directory / "ca.key")
    if ca.cert.exists() and ca.key.exists():
        return ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    files = _save(directory, "ca", cert, key)
    return CA(files.cert, files.key)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def issue(
    ca: CA,
    directory: str | os.PathLike[str],
    name: str,
    cn: str,
    *,
    sans: Sequence[str] | None = None,
    client: bool = False,
    server: bool = True,
    organizations: Sequence[str] = (),
    days: int = 825,
) -> CertFiles:
    """Sign a leaf certificate ``<name>.crt``/``<name>.key`` in ``directory``.

    ``server`` adds the serverAuth usage and SANs (default 127.0.0.1 and localhost: lab servers listen on
    loopback); ``client`` adds clientAuth, which etcd and kube-apiserver require of client certificates.
    ``organizations`` become O= attributes, which Kubernetes reads as group names (e.g. system:masters).
    """
    if not (client or server):
        raise ValueError("a certificate must be for a client, a server or both")
    ca_cert, ca_key = ca.load()
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(aki, critical=False)
    )
    san_entries = DEFAULT_SANS if sans is None and server else (sans or ())
    if san_entries:
        builder = builder.add_extension(_san(san_entries), critical=False)
    return _save(Path(directory), name, builder.sign(ca_key, hashes.SHA256()), key)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A bare key pair as PEM files (no certificate): e.g. Kubernetes' service-account signing key."""

    key: Path
    pub: Path


def make_key_pair(directory: str | os.PathLike[str], name: str) -> KeyPair:
    """Create ``<name>.key``/``<name>.pub`` (ECDSA P-256), or return the pair already there.

    kube-apiserver signs service-account tokens with the private key and checks them with the public one;
    a restored cluster must reuse the very same pair (escrowed), or every token already issued is rejected.
    """
    directory = Path(directory)
    pair = KeyPair(directory / f"{name}.key", directory / f"{name}.pub")
    if pair.key.exists() and pair.pub.exists():
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write(pair.key, key_pem, 0o600)
    _write(pair.pub, _public_pem(key), 0o644)
    return pair


def import_key_pair(private_key: str | os.PathLike[str], directory: str | os.PathLike[str], name: str) -> KeyPair:
    """Copy an existing (escrowed) private key into ``directory`` and derive its public half next to it."""
    data = Path(private_key).read_bytes()
    key = serialization.load_pem_private_key(data, password=None)
    directory = Path(directory)
    pair = KeyPair(directory / f"{name}.key", directory / f"{name}.pub")
    _write(pair.key, data, 0o600)
    _write(pair.pub, _public_pem(key), 0o644)
    return pair


def _public_pem(key: object) -> bytes:
    public = key.public_key()  # type: ignore[attr-defined]
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
