"""Velero (``github.com/vmware-tanzu/velero``, built in ``gomod/velero``) running against the lab, storing its
backups in the lab's MinIO through its AWS object-store plugin.

As ``velero install`` would set it up, minus what needs a pod: Velero's CRDs from the same pinned module
(before it starts: it watches them), its namespace ``velero-lab`` (the seeded cluster already has a ``velero``
namespace, with Velero's upstream sample location in it), a BackupStorageLocation ``default`` (provider
``aws``, bucket ``velero``, prefix ``lab``, the MinIO endpoint with path-style addressing), and ``velero server``
as a process outside the cluster with its own kubeconfig (``system:masters``, as Velero's ClusterRoleBinding
to cluster-admin grants). The AWS plugin is a file in the server's ``--plugin-dir``, which Velero starts as a
gRPC child process; MinIO's keys reach it as an AWS credentials file (``AWS_SHARED_CREDENTIALS_FILE``), never
in argv. No node agent: object backups need none (no file-system backups of volumes, no data movement).
The server counts as started once its metrics endpoint answers and it has marked the location Available
(backups against an unavailable location fail their validation).

Its controller manager binds :8080 on every address (``MANAGER_METRICS_PORT``), so one Velero runs per machine
at a time: the server holds a machine-wide lock on that port from its start to its exit (``port_lock``), and
a second lab's Velero waits for it (``lock_wait`` seconds at most, a progress line naming the holder).

``backup`` and ``restore`` run the ``velero`` CLI (``--wait``), as a person would, and return the phase.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool_lab.components import port_lock
from drtool_lab.components.cluster_process import ClusterProcess
from drtool_lab.components.minio import REGION, MinioServer
from drtool_lab.gomods import lab_binary, required_version

from drtool.environ import child_env
from drtool.errors import SourceError
from drtool.servers import process
from drtool.servers.component import Component

NAMESPACE = "velero-lab"  # not "velero": the seed holds Velero's upstream sample location there
BUCKET = "velero"
PREFIX = "lab"
LOCATION = "default"
PLUGIN = "velero-plugin-for-aws"
VELERO_MODULE = "github.com/vmware-tanzu/velero"
DATA_MOVER_CRDS = "config/crd/v2alpha1/bases/*.yaml"
# Velero v1.18.3 starts its controller manager without metrics options (pkg/cmd/server/server.go, ctrl.NewManager),
# so controller-runtime serves metrics on :8080, on every address, and no flag moves it: one Velero per machine,
# which the port's machine-wide lock (port_lock) makes a wait instead of a failed start
MANAGER_METRICS_PORT = 8080
FINAL_PHASES = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
Obj = dict[str, Any]


@dataclasses.dataclass
class VeleroServer(ClusterProcess):
    kind = "velero"
    binaries = ("velero", PLUGIN)
    identity = ("drtool-lab-velero", ("system:masters",))
    minio_component: str = ""
    s3_url: str = ""  # the MinIO endpoint the location names
    credentials: str = ""  # MinIO's keys in an AWS credentials file, in MinIO's folder (0600)
    lock_wait: float = 1800.0  # how long a second lab's Velero waits for the first one to stop

    def requirements(self) -> tuple[str, ...]:
        return ("kube-apiserver", "minio")

    def link(self, peers: Mapping[str, Component]) -> None:
        super().link(peers)
        minio = peers.get(self.minio_component) or next((c for c in peers.values() if isinstance(c, MinioServer)), None)
        if not isinstance(minio, MinioServer):
            raise SourceError(f"velero {self.name} has no MinIO", "start it through a lab: drtool lab up --with velero")
        self.minio_component, self.s3_url = minio.name, minio.api_url
        self.credentials = str(minio.credentials_file())
        self.__dict__["_minio"] = minio  # not a field: never saved; the bucket is made before each start

    @property
    def plugin_dir(self) -> Path:
        return self.path / "plugins"

    @property
    def url(self) -> str:
        """The location's bucket and prefix as drtool names a store: ``drtool import velero --from`` takes it."""
        return f"s3://{BUCKET}/{PREFIX}"

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/metrics"

    def location(self) -> Obj:
        return {
            "apiVersion": "velero.io/v1",
            "kind": "BackupStorageLocation",
            "metadata": {"name": LOCATION, "namespace": NAMESPACE},
            "spec": {
                "provider": "aws",
                "default": True,
                "objectStorage": {"bucket": BUCKET, "prefix": PREFIX},
                "config": {"region": REGION, "s3ForcePathStyle": "true", "s3Url": self.s3_url},
            },
        }

    def prepare(self) -> None:
        from drtool_lab import upstream
        from drtool_lab.kube_seed import KubeClient, install_crds, wait_established

        self.__dict__["_minio"].create_bucket(BUCKET)
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lab_binary(PLUGIN), self.plugin_dir / PLUGIN)  # Velero runs every executable there
        client = KubeClient(self.access())
        install_crds(client, ["velero"])
        # the server also insists on the data mover's CRDs (velero.io/v2alpha1), which the seed does not install
        movers = upstream.yaml_docs("velero", [DATA_MOVER_CRDS])
        for doc in movers:
            client.create(doc, read_existing=False)
        wait_established(client, [d["metadata"]["name"] for d in movers])
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        client.apply(self.location())
        client.apply(self.deployment())

    def deployment(self) -> Obj:
        """The Deployment `velero install` makes, scaled to zero: Velero's pod-volume restore action reads its
        own Deployment for the restore helper's image, and a restore fails without it (nothing runs from it)."""
        labels = {"component": "velero", "deploy": "velero"}
        container = {"name": "velero", "image": f"velero/velero:{required_version('velero', VELERO_MODULE)}"}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "velero", "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        }

    def argv(self) -> list[str]:
        return [
            str(lab_binary("velero")),
            "server",
            f"--kubeconfig={self.kubeconfig_path}",
            f"--namespace={NAMESPACE}",
            f"--plugin-dir={self.plugin_dir}",
            f"--metrics-address=127.0.0.1:{self.health_port}",
            "--store-validation-frequency=10s",
            "--backup-sync-period=10s",  # a backup copied into the bucket shows up within seconds
            "--log-level=info",
        ]

    def process_env(self) -> dict[str, str]:
        return {"AWS_SHARED_CREDENTIALS_FILE": self.credentials}  # the AWS plugin, Velero's child, inherits it

    def spawn(self) -> int:
        """The server, started once no other lab's Velero runs; it inherits the port's lock and holds it."""
        with port_lock.held(MANAGER_METRICS_PORT, f"velero {self.name} ({self.path})", self.lock_wait) as lock:
            _require_free(MANAGER_METRICS_PORT)  # held by something else than a lab's Velero
            env = self.process_env()
            pid = process.spawn(self.argv(), self.log_path, env=env, cwd=self.path, pass_fds=(lock.fd,))
            lock.record(f"velero server pid {pid} of the lab component at {self.path}")
            return pid

    def started(self) -> None:
        process.wait_until(self.location_available, 120, "Velero's BackupStorageLocation", self.log_path)

    def location_available(self) -> bool:
        from drtool_lab.kube_seed import KubeClient

        path = f"/apis/velero.io/v1/namespaces/{NAMESPACE}/backupstoragelocations/{LOCATION}"
        return (KubeClient(self.access()).get(path).get("status") or {}).get("phase") == "Available"

    # --- what a person does with it ------------------------------------------------------------------

    def cli(self, *args: str, timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
        """``velero ARGS`` against this server (its kubeconfig and namespace); a failure raises with its output."""
        argv = [str(lab_binary("velero")), *args, f"--kubeconfig={self.kubeconfig_path}", f"--namespace={NAMESPACE}"]
        env = child_env({"HOME": str(self.path)})  # the CLI keeps its config in $HOME/.config/velero
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
        if result.returncode != 0:
            raise SourceError(f"velero {' '.join(args[:2])} failed: {(result.stderr or result.stdout).strip()[-300:]}")
        return result

    def backup(self, name: str, *flags: str, timeout: float = 900.0) -> Obj:
        """``velero backup create NAME --wait`` with ``flags``; the Backup object as Velero left it."""
        self.cli("backup", "create", name, "--wait", *flags, timeout=timeout)
        return self.final("backups", name, timeout)

    def restore(self, name: str, backup: str, *flags: str, timeout: float = 900.0) -> Obj:
        """``velero restore create NAME --from-backup BACKUP --wait``; the Restore object as Velero left it."""
        self.cli("restore", "create", name, "--from-backup", backup, "--wait", *flags, timeout=timeout)
        return self.final("restores", name, timeout)

    def final(self, plural: str, name: str, timeout: float) -> Obj:
        """The object once its phase is final (``--wait`` may return while Velero still finalizes it)."""
        from drtool_lab.kube_seed import KubeClient

        client = KubeClient(self.access())
        path = f"/apis/velero.io/v1/namespaces/{NAMESPACE}/{plural}/{name}"
        seen: Obj = {}

        def done() -> bool:
            seen.update(client.get(path))
            return (seen.get("status") or {}).get("phase") in FINAL_PHASES

        process.wait_until(done, timeout, f"Velero's {plural[:-1]} {name}", self.log_path)
        return seen

    def describe(self) -> str:
        return f"location {LOCATION} at {self.url} on {self.s3_url}, metrics {self.health_url()}"


def _require_free(port: int) -> None:
    with socket.socket() as probe:
        try:
            probe.bind(("", port))
        except OSError:
            raise SourceError(
                f"port {port} is in use by something other than a lab's Velero: Velero v1.18.3's controller "
                "manager always serves its metrics there",
                "stop what holds the port (ss -ltnp 'sport = :8080' names it)",
            ) from None
