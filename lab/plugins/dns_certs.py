"""The plugin's lab: cert-manager, CoreDNS, ExternalDNS and load balancers in a lab kube-apiserver, and a
TSIG-protected zone in a lab bind9 (``LabSupport``: `drtool lab`, the demo, rehearsals and the tests).

Certificates are real: a CA and leaf certificates made with ``cryptography`` (``drtool.servers.pki``), stored
as cert-manager stores them — Secrets with the issuer and certificate-name annotations, Certificates with
the status cert-manager reports (Ready, notBefore/notAfter, renewalTime, revision) — so that a restore can
be judged by cert-manager's own re-issuance rules without a cert-manager controller. One certificate
expires in 10 days (renewal due in 5): it must be warned about, not re-issued. The zone is written
through RFC 2136 updates, as ExternalDNS or an operator would, with records that point at the cluster's
load balancer (the cut-over list) and records that do not. The objects are in ``dns_certs.yaml`` beside it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import string
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import dns.query
import dns.rcode
import dns.update
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from drtool_lab.cluster import KINDS, apiserver
from drtool_lab.components.bind9 import Bind9Server
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.kube_seed import KubeClient, install_crds
from drtool_lab.lab import Lab
from drtool_plugins.dns_certs import tsig

from drtool.errors import SourceError
from drtool.servers import pki

Obj = dict[str, Any]
ZONE = "ml.example.com"
SERIAL = 2026112901
NAMESPACE = "ml-serving"
STAMP = "%Y-%m-%dT%H:%M:%SZ"
VALUES = {
    "zone": ZONE,
    "ns": NAMESPACE,
    "lb_ip": "203.0.113.10",
    "lb_hostname": "asr-gw.lb.ml.example.com",
    "ingress_ip": "203.0.113.20",
    "owner_id": "lab-source",
    "kube_dns_ip": "10.96.0.10",
}


class DnsCertsLab:
    """Implements ``drtool.plugin.contract.LabSupport``."""

    kinds = (*KINDS, "bind9")  # the living cluster: cert-manager runs and judges what is seeded and restored

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        server, bind = _parts(lab)
        seed_kubernetes(KubeClient(server.access()), bind, max(1, scale))
        seed_zone(bind)
        return {
            "kubeconfig": str(server.readonly_kubeconfig),
            "dns_server": bind.address,
            "tsig_key_file": str(bind.key_file),
            "zones": [ZONE],
        }

    def target(self, lab: Lab) -> dict[str, Any]:
        server, bind = _parts(lab)
        return {
            "kubeconfig": str(server.admin_kubeconfig),
            "dns_server": bind.address,
            "tsig_key_file": str(bind.key_file),
        }


def _parts(lab: Lab) -> tuple[KubeApiserver, Bind9Server]:
    """Start the lab's cluster (living unless brought up bare) and bind9; return the two servers."""
    server = apiserver(lab)
    lab.up([Bind9Server.kind])
    bind = lab.first(Bind9Server.kind)
    assert isinstance(bind, Bind9Server)
    return server, bind


def render(section: str, bind: Bind9Server) -> list[Obj] | str:
    """One section of ``dns_certs.yaml`` with the lab's values filled in (YAML documents, or the zone text)."""
    templates = yaml.safe_load(resources.files(__package__).joinpath("dns_certs.yaml").read_text())
    text = string.Template(templates[section]).substitute(
        VALUES, dns_server=bind.address, dns_host="127.0.0.1", dns_port=bind.port
    )
    return text if section == "zone" else [d for d in yaml.safe_load_all(text) if d]


# --- Kubernetes content ---------------------------------------------------------------------------


def _secret(ns: str, name: str, data: dict[str, bytes], annotations: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls" if "tls.crt" in data else "Opaque",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


@dataclasses.dataclass(frozen=True)
class LabCert:
    name: str
    issuer: tuple[str, str]  # kind, name
    dns_name: str
    days: int
    renew_before: dt.timedelta | None = None

    def certificate(self) -> Obj:
        spec: Obj = {
            "secretName": self.name,
            "dnsNames": [self.dns_name],
            "issuerRef": {"name": self.issuer[1], "kind": self.issuer[0], "group": "cert-manager.io"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        }
        if self.renew_before:
            spec["renewBefore"] = f"{int(self.renew_before.total_seconds() // 3600)}h0m0s"
        meta = {"name": self.name, "namespace": NAMESPACE}
        return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta, "spec": spec}

    def issued(self, ca: pki.CA, folder: Path) -> tuple[Obj, Obj]:
        """The Secret cert-manager would have written, and the Certificate status it would have reported."""
        files = pki.issue(ca, folder, self.name, self.dns_name, sans=[self.dns_name], days=self.days)
        annotations = {
            "cert-manager.io/certificate-name": self.name,
            "cert-manager.io/issuer-name": self.issuer[1],
            "cert-manager.io/issuer-kind": self.issuer[0],
            "cert-manager.io/issuer-group": "cert-manager.io",
            "cert-manager.io/common-name": self.dns_name,
            "cert-manager.io/alt-names": self.dns_name,
        }
        data = {"tls.crt": files.cert.read_bytes(), "tls.key": files.key.read_bytes(), "ca.crt": ca.cert.read_bytes()}
        secret = _secret(NAMESPACE, self.name, data, annotations)
        secret["metadata"]["labels"] = {"controller.cert-manager.io/fao": "true"}
        x = x509.load_pem_x509_certificate(files.cert.read_bytes())
        lifetime = x.not_valid_after_utc - x.not_valid_before_utc
        renewal = x.not_valid_after_utc - (self.renew_before or lifetime / 3)
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "Certificate is up to date and has not expired",
            "lastTransitionTime": x.not_valid_before_utc.strftime(STAMP),
            "observedGeneration": 1,
        }
        status = {
            "conditions": [ready],
            "notBefore": x.not_valid_before_utc.strftime(STAMP),
            "notAfter": x.not_valid_after_utc.strftime(STAMP),
            "renewalTime": renewal.strftime(STAMP),
            "revision": 1,
        }
        return secret, {**self.certificate(), "spec": None, "status": status}


def lab_certificates(scale: int) -> list[LabCert]:
    return [
        LabCert("asr-tls", ("ClusterIssuer", "lab-ca"), f"asr.{ZONE}", 90),
        LabCert("expiring-tls", ("Issuer", "team-ca"), f"old.{ZONE}", 10, dt.timedelta(hours=120)),
        *(LabCert(f"bulk-{i}-tls", ("ClusterIssuer", "lab-ca"), f"svc{i}.{ZONE}", 90) for i in range(scale - 1)),
    ]


def seed_kubernetes(client: KubeClient, bind: Bind9Server, scale: int = 1) -> None:
    """Everything the plugin backs up, plus what it must leave out (an unrelated Secret, a CertificateRequest)."""
    install_crds(client, ("cert-manager", "external-dns"))
    for ns in ("cert-manager", "external-dns", NAMESPACE):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    objs: list[Obj] = []
    statuses: list[Obj] = []
    with tempfile.TemporaryDirectory(prefix="drtool-dns-certs-") as tmp:
        folder = Path(tmp)
        root = pki.make_ca(folder, "drtool lab root CA")
        team = pki.issue(root, folder, "team-ca", "team CA", sans=[], days=365)
        objs += _issuer_secrets(root, team)
        for cert in lab_certificates(scale):
            secret, status = cert.issued(root, folder)
            objs += [secret, cert.certificate()]
            statuses.append({k: v for k, v in status.items() if k != "spec"})
    for obj in [*objs, *render("issuers", bind), *render("dns", bind), *render("runtime", bind)]:
        client.apply(obj)
    for status in [*statuses, *render("status", bind)]:
        client.apply(status, "status")


def _issuer_secrets(root: pki.CA, team: pki.CertFiles) -> list[Obj]:
    """The CA key pairs of the CA issuers, the ACME account key and the DNS01 solver's TSIG secret."""
    account = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return [
        _secret("cert-manager", "lab-root-ca", {"tls.crt": root.cert.read_bytes(), "tls.key": root.key.read_bytes()}),
        _secret("cert-manager", "letsencrypt-account-key", {"tls.key": account}),
        _secret("cert-manager", "rfc2136-tsig", {"secret": base64.b64encode(b"lab-dns01-solver-secret-0123456")}),
        _secret(NAMESPACE, "team-ca-keypair", {"tls.crt": team.cert.read_bytes(), "tls.key": team.key.read_bytes()}),
    ]


# --- the zone -------------------------------------------------------------------------------------


def seed_zone(bind: Bind9Server) -> None:
    """The zone's records by one RFC 2136 update (TSIG-signed), its SOA serial set to ``SERIAL``."""
    key = tsig.load(str(bind.key_file))
    update = dns.update.UpdateMessage(f"{ZONE}.", **(key.kwargs() if key else {}))
    zone_text = render("zone", bind)
    assert isinstance(zone_text, str)
    for line in zone_text.splitlines():
        name, ttl, rdtype, value = line.split(None, 3)
        update.add(name, int(ttl), rdtype, value)
    update.replace("@", 300, "SOA", f"ns1.{ZONE}. hostmaster.{ZONE}. {SERIAL} 3600 600 604800 300")
    response = dns.query.tcp(update, "127.0.0.1", port=bind.port, timeout=30)
    if response.rcode() != dns.rcode.NOERROR:
        raise SourceError(f"seeding zone {ZONE} in bind9 {bind.name}: {dns.rcode.to_text(response.rcode())}")
