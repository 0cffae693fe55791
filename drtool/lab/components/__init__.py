"""One module per lab server kind; ``KINDS`` maps the names `drtool lab up --with` accepts to their classes."""

from __future__ import annotations

from drtool.lab.components.base import Component
from drtool.lab.components.etcd import EtcdServer
from drtool.lab.components.kube_apiserver import KubeApiserver
from drtool.lab.components.minio import MinioServer
from drtool.lab.components.postgres import PostgresServer

KINDS: dict[str, type[Component]] = {
    EtcdServer.kind: EtcdServer,
    KubeApiserver.kind: KubeApiserver,
    MinioServer.kind: MinioServer,
    PostgresServer.kind: PostgresServer,
}

__all__ = ["KINDS", "Component"]
