"""One module per lab server kind; ``KINDS`` maps the names `drtool lab up --with` accepts to their classes."""

from __future__ import annotations

from drtool_lab.components.argocd import ArgoCDController, ArgoCDRedis, ArgoCDRepoServer
from drtool_lab.components.bind9 import Bind9Server
from drtool_lab.components.cert_manager import CertManagerController
from drtool_lab.components.git_server import GitServer
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.components.kube_controller_manager import KubeControllerManager
from drtool_lab.components.kube_scheduler import KubeScheduler
from drtool_lab.components.kuberay import KubeRayOperator
from drtool_lab.components.kueue import KueueController
from drtool_lab.components.kwok import KwokController
from drtool_lab.components.lab_node import LabNodeController
from drtool_lab.components.minio import MinioServer
from drtool_lab.components.mlflow import MlflowServer
from drtool_lab.components.postgres import PostgresServer
from drtool_lab.components.registry import RegistryServer
from drtool_lab.components.trainer import JobSetController, TrainerController
from drtool_lab.components.velero import VeleroServer

from drtool.servers.component import Component
from drtool.servers.etcd import EtcdServer
from drtool.servers.openbao import OpenBaoServer

KINDS: dict[str, type[Component]] = {
    ArgoCDController.kind: ArgoCDController,
    ArgoCDRedis.kind: ArgoCDRedis,
    ArgoCDRepoServer.kind: ArgoCDRepoServer,
    Bind9Server.kind: Bind9Server,
    CertManagerController.kind: CertManagerController,
    EtcdServer.kind: EtcdServer,
    KubeApiserver.kind: KubeApiserver,
    KubeControllerManager.kind: KubeControllerManager,
    KubeScheduler.kind: KubeScheduler,
    KubeRayOperator.kind: KubeRayOperator,
    KueueController.kind: KueueController,
    KwokController.kind: KwokController,
    JobSetController.kind: JobSetController,
    LabNodeController.kind: LabNodeController,
    GitServer.kind: GitServer,
    MinioServer.kind: MinioServer,
    MlflowServer.kind: MlflowServer,
    OpenBaoServer.kind: OpenBaoServer,
    PostgresServer.kind: PostgresServer,
    RegistryServer.kind: RegistryServer,
    TrainerController.kind: TrainerController,
    VeleroServer.kind: VeleroServer,
}

__all__ = ["KINDS", "Component"]
