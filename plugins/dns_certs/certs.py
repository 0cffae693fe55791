"""Certificates as cert-manager sees them: x509 facts from a Secret, expiry against the RTO, and the
reasons cert-manager's trigger policy would re-issue a restored Certificate.

cert-manager issues again (a new key, a new CertificateRequest, an ACME order against the CA's rate
limits) when its trigger policy chain fails for a Certificate (internal/controller/certificates/policies:
SecretDoesNotExist, SecretIsMissingData, SecretPublicKeysDiffer, SecretPrivateKeyMatchesSpec,
SecretIssuerAnnotationsNotUpToDate, the current certificate valid for the spec, CurrentCertificateNearingExpiry).
``reissue_reasons`` evaluates the same conditions on the restored objects, so verify can prove, without a
cert-manager controller, that the restore will not trigger issuance.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import ipaddress
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from drtool.durations import parse_duration

Obj = dict[str, Any]
CERT_NAME = "cert-manager.io/certificate-name"
ISSUER_NAME = "cert-manager.io/issuer-name"
ISSUER_KIND = "cert-manager.io/issuer-kind"
ISSUER_GROUP = "cert-manager.io/issuer-group"
DEFAULT_GROUP = "cert-manager.io"


@dataclasses.dataclass(frozen=True)
class CertFacts:
    """What a backup records of one issued certificate (public data only)."""

    certificate: str  # namespace/name of the Certificate ("" for a bare TLS Secret)
    secret: str  # namespace/name
    subject: str
    dns_names: tuple[str, ...]
    serial: str
    not_before: str
    not_after: str

    def expires(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.not_after)


def decode(secret: Obj, key: str) -> bytes:
    """One data key of a Secret, base64-decoded; empty when absent or not base64."""
    value = (secret.get("data") or {}).get(key)
    try:
        return base64.b64decode(value) if value else b""
    except (binascii.Error, ValueError):
        return b""


def leaf(pem: bytes) -> x509.Certificate | None:
    """The first certificate of a PEM chain (cert-manager puts the leaf first), None if there is none."""
    try:
        return x509.load_pem_x509_certificates(pem)[0] if pem else None
    except ValueError:
        return None


def facts(certificate: str, secret: Obj) -> CertFacts | None:
    cert = leaf(decode(secret, "tls.crt"))
    if cert is None:
        return None
    meta = secret["metadata"]
    return CertFacts(
        certificate=certificate,
        secret=f"{meta.get('namespace')}/{meta['name']}",
        subject=cert.subject.rfc4514_string(),
        dns_names=tuple(_san(cert, x509.DNSName)),
        serial=format(cert.serial_number, "x"),
        not_before=cert.not_valid_before_utc.isoformat(),
        not_after=cert.not_valid_after_utc.isoformat(),
    )


def _san(cert: x509.Certificate, kind: type) -> list[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in ext.get_values_for_type(kind)]


@dataclasses.dataclass(frozen=True)
class Expiry:
    certificate: str
    secret: str
    not_after: str
    days_left: float
    warn: bool
    expired: bool


def expiry_report(all_facts: list[CertFacts], now: dt.datetime, horizon: dt.timedelta) -> list[Expiry]:
    """Each certificate's expiry, soonest first; ``warn`` when it ends within ``horizon`` (RTO + margin)."""
    out = []
    for f in sorted(all_facts, key=lambda f: f.not_after):
        left = f.expires() - now
        out.append(
            Expiry(
                f.certificate,
                f.secret,
                f.not_after,
                round(left.total_seconds() / 86400, 2),
                left <= horizon,
                left <= dt.timedelta(0),
            )
        )
    return out


# --- would cert-manager re-issue? -----------------------------------------------------------------


def reissue_reasons(certificate: Obj, secret: Obj | None, now: dt.datetime) -> list[str]:
    """Why cert-manager's trigger policy would issue ``certificate`` again given ``secret``; [] when it would not."""
    spec = certificate.get("spec") or {}
    if secret is None:
        return ["SecretDoesNotExist: the Secret spec.secretName names is missing"]
    crt_pem, key_pem = decode(secret, "tls.crt"), decode(secret, "tls.key")
    if not crt_pem or not key_pem:
        return ["SecretIsMissingData: tls.crt or tls.key is empty"]
    cert = leaf(crt_pem)
    try:
        key = load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        key = None
    if cert is None or key is None:
        return ["InvalidCertificate: tls.crt or tls.key does not parse"]
    reasons = []
    if _spki(key.public_key()) != _spki(cert.public_key()):
        reasons.append("SecretPublicKeysDiffer: tls.key does not belong to tls.crt")
    reasons += _key_matches_spec(key, spec.get("privateKey") or {})
    reasons += _issuer_annotations(certificate, secret)
    reasons += _names_match_spec(cert, spec)
    renewal = renewal_time(cert, spec)
    if renewal <= now:
        reasons.append(f"Renewing: renewal time {renewal.isoformat()} has passed")
    return reasons


def _spki(public_key: Any) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_matches_spec(key: Any, wanted: Mapping[str, Any]) -> list[str]:
    algorithm = str(wanted.get("algorithm") or "RSA").upper()
    kinds = {"RSA": rsa.RSAPrivateKey, "ECDSA": ec.EllipticCurvePrivateKey, "ED25519": ed25519.Ed25519PrivateKey}
    if algorithm in kinds and not isinstance(key, kinds[algorithm]):
        return [f"SecretPrivateKeyMismatchesSpec: key is not {algorithm}"]
    size = wanted.get("size")
    if size and hasattr(key, "key_size") and int(size) != key.key_size:
        return [f"SecretPrivateKeyMismatchesSpec: key size {key.key_size}, spec wants {size}"]
    return []


def _issuer_annotations(certificate: Obj, secret: Obj) -> list[str]:
    ref = (certificate.get("spec") or {}).get("issuerRef") or {}
    annotations = secret["metadata"].get("annotations") or {}
    wanted = {
        ISSUER_NAME: ref.get("name", ""),
        ISSUER_KIND: ref.get("kind") or "Issuer",
        ISSUER_GROUP: ref.get("group") or DEFAULT_GROUP,
        CERT_NAME: certificate["metadata"]["name"],
    }
    return [
        f"SecretIssuerAnnotationsNotUpToDate: {k}={annotations.get(k)!r}, want {v!r}"
        for k, v in wanted.items()
        if annotations.get(k, "" if k != ISSUER_GROUP else DEFAULT_GROUP) != v
    ]


def _names_match_spec(cert: x509.Certificate, spec: Mapping[str, Any]) -> list[str]:
    """cert-manager's FuzzyX509AltNamesMatchSpec: DNS names, IPs, URIs and emails as sets (the common name may
    appear among the DNS names)."""
    dns_names = set(_san(cert, x509.DNSName))
    wanted_dns = set(spec.get("dnsNames") or [])
    common = spec.get("commonName")
    out = []
    if wanted_dns - dns_names or (dns_names - wanted_dns - ({common} if common else set())):
        out.append(f"SecretMismatch: DNS names {sorted(dns_names)}, spec wants {sorted(wanted_dns)}")
    ips = {str(ip) for ip in _san(cert, x509.IPAddress)}
    if ips != {str(ipaddress.ip_address(ip)) for ip in spec.get("ipAddresses") or []}:
        out.append(f"SecretMismatch: IP addresses {sorted(ips)}")
    if set(_san(cert, x509.UniformResourceIdentifier)) != set(spec.get("uris") or []):
        out.append("SecretMismatch: URIs differ from spec.uris")
    if set(_san(cert, x509.RFC822Name)) != set(spec.get("emailAddresses") or []):
        out.append("SecretMismatch: email addresses differ from spec.emailAddresses")
    return out


def renewal_time(cert: x509.Certificate, spec: Mapping[str, Any]) -> dt.datetime:
    """notAfter - renewBefore, where renewBefore defaults to a third of the lifetime (and is capped by it)."""
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    before = lifetime / 3
    if spec.get("renewBeforePercentage") is not None:
        before = lifetime * int(spec["renewBeforePercentage"]) / 100
    elif spec.get("renewBefore"):
        before = parse_duration(str(spec["renewBefore"]))  # Go's 720h0m0s parses too
        if before >= lifetime:
            before = lifetime / 3
    return cert.not_valid_after_utc - before
