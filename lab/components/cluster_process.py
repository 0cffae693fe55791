"""What the lab's controllers have in common: a process that runs against the lab's kube-apiserver.

kube-controller-manager, kube-scheduler, kwok, Kueue and cert-manager each get, at first start, a client
certificate for their own identity signed by the lab's cluster CA and a kubeconfig naming it (in their
component folder), as kubeadm gives the control plane its kubeconfigs; those that serve HTTPS get a serving
certificate for 127.0.0.1 from the same CA, so the API server and the lab's health checks verify them.
``link`` takes the API server's address and CA from the lab, before every start.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from drtool_lab.components.kube_apiserver import KubeAccess, KubeApiserver, kubeconfig
from drtool_lab.gomods import lab_binary

from drtool.errors import SourceError
from drtool.servers import pki, process
from drtool.servers.component import Component


@dataclasses.dataclass
class ClusterProcess(Component):
    """A lab server that is a client of the lab's kube-apiserver (``apiserver_component`` names it)."""

    # the Kubernetes user it acts as: (common name, groups)
    identity: ClassVar[tuple[str, tuple[str, ...]]] = ("", ())
    apiserver_component: str = ""
    server: str = ""  # the API server's URL
    cluster_ca: str = ""  # the lab's cluster CA certificate (the key sits beside it)
    health_port: int = 0

    def __post_init__(self) -> None:
        self.health_port = self.health_port or process.free_port()

    # --- wiring ------------------------------------------------------------------------------------

    def requirements(self) -> tuple[str, ...]:
        return ("kube-apiserver",)

    def link(self, peers: Mapping[str, Component]) -> None:
        server = peers.get(self.apiserver_component) if self.apiserver_component else None
        server = server or next((c for c in peers.values() if isinstance(c, KubeApiserver)), None)
        if not isinstance(server, KubeApiserver):
            raise SourceError(f"{self.kind} {self.name} has no kube-apiserver", "start it through a lab")
        self.apiserver_component, self.server, self.cluster_ca = server.name, server.url, str(server.ca.cert)

    # --- files --------------------------------------------------------------------------------------

    @property
    def kubeconfig_path(self) -> Path:
        return self.path / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.path / "pki"

    def access(self) -> KubeAccess:
        """This process's own identity (for what the lab does on its behalf: nodes, webhooks, CRDs)."""
        cert, key = self.pki_dir / "client.crt", self.pki_dir / "client.key"
        return KubeAccess(self.server, self.cluster_ca, str(cert), str(key))

    @property
    def serving_dir(self) -> Path:
        return self.path / "serving"

    def serving_cert(self) -> pki.CertFiles:
        """A serving certificate for 127.0.0.1 signed by the cluster CA, issued once as ``serving/tls.crt``
        and ``tls.key`` (the names controller-runtime's webhook server reads from its certificate folder)."""
        files = pki.CertFiles(self.serving_dir / "tls.crt", self.serving_dir / "tls.key")
        if not files.cert.exists():
            files = pki.issue(self._ca(), self.serving_dir, "tls", f"{self.name}.lab")
        return files

    def _ca(self) -> pki.CA:
        ca_cert = Path(self.cluster_ca)
        return pki.CA(ca_cert, ca_cert.with_name("ca.key"))

    def ensure_kubeconfig(self) -> None:
        if not (self.pki_dir / "client.crt").exists():
            cn, groups = self.identity
            pki.issue(self._ca(), self.pki_dir, "client", cn, client=True, server=False, organizations=groups)
        pki.write_private(self.kubeconfig_path, kubeconfig(self.access(), f"{self.name}").encode())

    # --- lifecycle ----------------------------------------------------------------------------------

    def argv(self) -> list[str]:
        raise NotImplementedError

    def kube_component_flags(self) -> dict[str, object]:
        """The flags kube-controller-manager and kube-scheduler share: its kubeconfig for everything, HTTPS
        on 127.0.0.1 with the lab's serving certificate (its /healthz is the lab's health check), one instance."""
        serving = self.serving_cert()
        return {
            "kubeconfig": self.kubeconfig_path,
            "authentication-kubeconfig": self.kubeconfig_path,
            "authorization-kubeconfig": self.kubeconfig_path,
            "bind-address": "127.0.0.1",
            "secure-port": self.health_port,
            "tls-cert-file": serving.cert,
            "tls-private-key-file": serving.key,
            "leader-elect": "false",
            "profiling": "false",
            "v": "0",
        }

    def health_url(self) -> str:
        return f"https://127.0.0.1:{self.health_port}/healthz"

    def prepare(self) -> None:
        """What must exist before the process starts (config files, CRDs, namespaces)."""

    def started(self) -> None:
        """What the lab does once the process answers (nodes to manage, webhook configurations)."""

    def process_env(self) -> dict[str, str]:
        """Variables the process starts with, beyond the scrubbed environment (``drtool.environ``)."""
        return {}

    def start(self, timeout: float = 120.0) -> None:
        for name in self.binaries:
            lab_binary(name)  # may build first (minutes): before the readiness clock starts
        if not self.server:
            raise SourceError(f"{self.kind} {self.name} has no kube-apiserver", "start it through a lab")
        self.path.mkdir(parents=True, exist_ok=True)
        self.ensure_kubeconfig()
        self.prepare()
        self.pid = self.spawn()
        try:
            process.wait_until(self.healthy, timeout, f"{self.kind} {self.name}", self.log_path, self.running)
            self.started()
        except BaseException:
            self.stop()  # never leave a half-started controller behind (its log stays for the post-mortem)
            raise

    def spawn(self) -> int:
        """Start the process, detached; its pid."""
        return process.spawn(self.argv(), self.log_path, env=self.process_env(), cwd=self.path)

    def healthy(self) -> bool:
        if not self.running():
            return False
        url = self.health_url()
        context = ssl.create_default_context(cafile=self.cluster_ca) if url.startswith("https") else None
        return process.http_ok(url, context)

    def describe(self) -> str:
        return f"{self.health_url()} (API server {self.server})"
