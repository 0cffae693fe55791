"""One module per lab server kind; ``KINDS`` maps the names `drtool lab up --with` accepts to their classes."""

from __future__ import annotations

from drtool.lab.components.base import Component
from drtool.lab.components.bind9 import Bind9Server
from drtool.lab.components.cert_manager import CertManagerController
from drtool.lab.components.etcd import EtcdServer
from drtool.lab.components.git_server import GitServer
from drtool.lab.components.kube_apiserver import KubeApiserver
from drtool.lab.components.kube_controller_manager import KubeControllerManager
from drtool.lab.components.kube_scheduler import KubeScheduler
from drtool.lab.components.kueue import KueueController
from drtool.lab.components.kwok import KwokController
from drtool.lab.components.lab_node import LabNodeController
from drtool.lab.components.minio import MinioServer
from drtool.lab.components.mlflow import MlflowServer
from drtool.lab.components.openbao import OpenBaoServer
from drtool.lab.components.postgres import PostgresServer
from drtool.lab.components.registry import RegistryServer

KINDS: dict[str, type[Component]] = {
    Bind9Server.kind: Bind9Server,
    CertManagerController.kind: CertManagerController,
    EtcdServer.kind: EtcdServer,
    KubeApiserver.kind: KubeApiserver,
    KubeControllerManager.kind: KubeControllerManager,
    KubeScheduler.kind: KubeScheduler,
    KueueController.kind: KueueController,
    KwokController.kind: KwokController,
    LabNodeController.kind: LabNodeController,
    GitServer.kind: GitServer,
    MinioServer.kind: MinioServer,
    MlflowServer.kind: MlflowServer,
    OpenBaoServer.kind: OpenBaoServer,
    PostgresServer.kind: PostgresServer,
    RegistryServer.kind: RegistryServer,
}

__all__ = ["KINDS", "Component"]
