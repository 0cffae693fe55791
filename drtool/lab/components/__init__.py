"""One module per lab server kind; ``KINDS`` maps the names `drtool lab up --with` accepts to their classes."""

from __future__ import annotations

from drtool.lab.components.base import Component
from drtool.lab.components.bind9 import Bind9Server
from drtool.lab.components.etcd import EtcdServer
from drtool.lab.components.git_server import GitServer
from drtool.lab.components.kube_apiserver import KubeApiserver
from drtool.lab.components.minio import MinioServer
from drtool.lab.components.mlflow import MlflowServer
from drtool.lab.components.openbao import OpenBaoServer
from drtool.lab.components.postgres import PostgresServer
from drtool.lab.components.registry import RegistryServer

KINDS: dict[str, type[Component]] = {
    Bind9Server.kind: Bind9Server,
    EtcdServer.kind: EtcdServer,
    KubeApiserver.kind: KubeApiserver,
    GitServer.kind: GitServer,
    MinioServer.kind: MinioServer,
    MlflowServer.kind: MlflowServer,
    OpenBaoServer.kind: OpenBaoServer,
    PostgresServer.kind: PostgresServer,
    RegistryServer.kind: RegistryServer,
}

__all__ = ["KINDS", "Component"]
