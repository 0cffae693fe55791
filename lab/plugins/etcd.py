"""The etcd plugin's ``LabSupport``: the etcd of a seeded lab control plane, and a new member to restore into.

The source is a real cluster's etcd, as in production: the lab's etcd with a kube-apiserver storing an AI
platform's objects in it (seeded once per lab, shared with the kubernetes and kueue plugins). Writing
synthetic keys into that etcd instead would corrupt the API server's storage.
"""

from __future__ import annotations

from typing import Any

from drtool_lab.cluster import KINDS, seeded_cluster
from drtool_lab.etcd_seed import settings_of
from drtool_lab.lab import Lab

from drtool.servers.etcd import EtcdServer


class EtcdLab:
    kinds: tuple[str, ...] = KINDS
    target_kinds: tuple[str, ...] = ()  # the restore starts the new member; nothing runs before

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        """Seed the lab's control plane (once) and return its etcd's client settings."""
        seeded_cluster(lab, scale)
        server = lab.first("etcd")
        assert isinstance(server, EtcdServer)
        return settings_of(server)

    def target(self, lab: Lab) -> dict[str, Any]:
        """A new member in its own folder of ``lab``; the restore starts it (nothing runs before)."""
        folder = lab.root / "etcd-restored"
        return {"data_dir": str(folder / "data"), "name": "etcd-restored", "start": True, "lab_dir": str(folder)}
