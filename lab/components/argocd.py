"""Argo CD (``github.com/argoproj/argo-cd/v3``, built in ``gomod/argocd``) running against the lab: opt-in,
`drtool lab up --with argocd`.

Three lab components, as Argo CD's own install runs them (its API server, UI, Dex and ApplicationSet
controller are left out: nothing in the lab needs them):

- ``argocd``: the application controller. It compares every Application with what its repo-server renders
  from Git, syncs the ones with automated sync, and writes their status. It runs outside the cluster, so
  ``ARGOCD_FAKE_IN_CLUSTER`` makes Argo CD's in-cluster destination (``https://kubernetes.default.svc``) the
  lab's API server, through the controller's kubeconfig (Argo CD's own switch for running it locally).
- ``argocd-repo-server``: clones the Application's repository (the lab's git server, ``git://``, serves it)
  and renders its manifests. Plain gRPC on 127.0.0.1 (``--disable-tls``), GPG off; Argo CD v3.6 runs the
  ``git-verify-wrapper.sh`` script of its image for every revision, so the component puts that script, read
  from the pinned module, first on its ``PATH``. It clones into its own folder (``TMPDIR``).
- ``argocd-redis``: the Redis both keep their caches in. ``lab-redis`` is miniredis, the in-memory Redis
  Argo CD's own tests use (a requirement of Argo CD's go.mod), so the lab needs no Redis package.

Before the controller starts, the lab installs what Argo CD's manifests and API server would: the
Application and AppProject CRDs, the ``argocd`` namespace, ``argocd-cm`` and ``argocd-secret`` from the
pinned module's ``manifests/base/config``, and the ``default`` AppProject its API server creates at start.
Its health check is the controller's ``/healthz`` on its metrics port, which Argo CD binds on every
interface (``0.0.0.0``, not configurable): metrics only, no API.

What the lab uses it for: showing that a restored Application with automated sync is held (Argo CD compares
it and syncs nothing) until a plan's release step, and what Argo CD then changes
(tests/plugins/test_argocd_holds.py).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping

from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.git_server import GitServer
from drtool_lab.gomods import lab_binary

from drtool.errors import SourceError
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision

NAMESPACE = "argocd"
VERIFY_WRAPPER = "hack/git-verify-wrapper.sh"  # Argo CD's image copies it to /usr/local/bin
CONFIG = ("manifests/base/config/argocd-cm.yaml", "manifests/base/config/argocd-secret.yaml")


@dataclasses.dataclass
class ArgoCDRedis(Component):
    kind = "argocd-redis"
    binaries = ("lab-redis",)
    port: int = 0

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        argv = [str(lab_binary("lab-redis")), self.address]
        self.path.mkdir(parents=True, exist_ok=True)
        self.pid = process.spawn(argv, self.log_path, cwd=self.path)
        process.wait_until(self.healthy, timeout, f"lab-redis {self.name} at {self.address}", self.log_path)

    def healthy(self) -> bool:
        """It answers a Redis PING."""
        if not self.running():
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as conn:
                conn.sendall(b"*1\r\n$4\r\nPING\r\n")  # RESP: miniredis takes no inline commands
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def describe(self) -> str:
        return f"redis://{self.address}"


def _peer(peers: Mapping[str, Component], kind: type[Component], who: str) -> Component:
    found = next((c for c in peers.values() if isinstance(c, kind)), None)
    if found is None:
        raise SourceError(f"{who} has no {kind.kind}", "start it through a lab (`drtool lab up --with argocd`)")
    return found


@dataclasses.dataclass
class ArgoCDRepoServer(Component):
    kind = "argocd-repo-server"
    binaries = ("argocd",)
    port: int = 0
    metrics_port: int = 0
    redis: str = ""

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()
        self.metrics_port = self.metrics_port or process.free_port()

    @classmethod
    def provisions(cls) -> list[Provision]:
        return GitServer.provisions()  # it clones and fetches with the git command

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requirements(self) -> tuple[str, ...]:
        return (ArgoCDRedis.kind,)

    def link(self, peers: Mapping[str, Component]) -> None:
        redis = _peer(peers, ArgoCDRedis, f"{self.kind} {self.name}")
        assert isinstance(redis, ArgoCDRedis)
        self.redis = redis.address

    def _install_wrapper(self) -> str:
        """The folder holding Argo CD's ``git-verify-wrapper.sh``, from the pinned module."""
        from drtool_lab.upstream import module_files

        bin_dir = self.path / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        [(_, text)] = module_files("argo-cd", [VERIFY_WRAPPER])
        script = bin_dir / "git-verify-wrapper.sh"
        script.write_text(text)
        script.chmod(0o755)
        return str(bin_dir)

    def start(self, timeout: float = 60.0) -> None:
        binary = lab_binary("argocd")  # may build first (minutes): before the readiness clock starts
        if not self.redis:
            raise SourceError(f"{self.kind} {self.name} has no argocd-redis", "start it through a lab")
        tmp = self.path / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {
            "ARGOCD_BINARY_NAME": "argocd-repo-server",
            "ARGOCD_GPG_ENABLED": "false",
            "PATH": f"{self._install_wrapper()}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "TMPDIR": str(tmp),  # its clones (/tmp/_argocd-repo/...) stay in the lab's folder
            "HOME": str(self.path),
        }
        argv = [
            str(binary),
            f"--redis={self.redis}",
            "--disable-tls",
            "--client-ca-path=",  # no mTLS: plain gRPC on loopback
            "--address=127.0.0.1",
            f"--port={self.port}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--logformat=text",
        ]
        self.pid = process.spawn(argv, self.log_path, env=env, cwd=self.path)
        what = f"argocd-repo-server {self.name} at {self.address}"
        process.wait_until(self.healthy, timeout, what, self.log_path, self.running)

    def healthy(self) -> bool:
        return self.running() and process.http_ok(f"http://127.0.0.1:{self.metrics_port}/healthz")

    def describe(self) -> str:
        return f"grpc://{self.address}"


@dataclasses.dataclass
class ArgoCDController(ClusterProcess):
    kind = "argocd"
    binaries = ("argocd",)
    identity = ("drtool-lab-argocd", ("system:masters",))
    redis: str = ""
    repo_server: str = ""

    def requirements(self) -> tuple[str, ...]:
        return ("kube-apiserver", ArgoCDRedis.kind, ArgoCDRepoServer.kind)

    def link(self, peers: Mapping[str, Component]) -> None:
        super().link(peers)
        redis = _peer(peers, ArgoCDRedis, f"{self.kind} {self.name}")
        repo = _peer(peers, ArgoCDRepoServer, f"{self.kind} {self.name}")
        assert isinstance(redis, ArgoCDRedis) and isinstance(repo, ArgoCDRepoServer)
        self.redis, self.repo_server = redis.address, repo.address

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/healthz"

    def prepare(self) -> None:
        from drtool_lab.kube_seed import KubeClient, install_crds
        from drtool_lab.upstream import yaml_docs

        client = KubeClient(self.access())
        install_crds(client, ["argo-cd"])
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, read_existing=False)
        for doc in yaml_docs("argo-cd", CONFIG):
            doc["metadata"]["namespace"] = NAMESPACE
            client.create(doc, read_existing=False)
        project = {  # what Argo CD's API server creates at its first start (server.initializeDefaultProject)
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "default", "namespace": NAMESPACE},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            },
        }
        client.create(project, read_existing=False)

    def process_env(self) -> dict[str, str]:
        return {
            "ARGOCD_BINARY_NAME": "argocd-application-controller",
            "ARGOCD_FAKE_IN_CLUSTER": "true",  # the in-cluster destination is the lab's API server (KUBECONFIG)
            "KUBECONFIG": str(self.kubeconfig_path),
            "HOME": str(self.path),
        }

    def argv(self) -> list[str]:
        if not (self.redis and self.repo_server):
            raise SourceError(f"argocd {self.name} has no argocd-redis or repo-server", "start it through a lab")
        return [
            str(lab_binary("argocd")),
            f"--kubeconfig={self.kubeconfig_path}",
            f"--namespace={NAMESPACE}",
            f"--redis={self.redis}",
            f"--repo-server={self.repo_server}",
            "--repo-server-plaintext",
            f"--metrics-port={self.health_port}",
            "--logformat=text",
        ]
