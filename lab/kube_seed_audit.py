"""Good and bad examples of the go-live checklist for `drtool audit`, seeded into a living lab.

``kube_seed_audit.yaml`` holds them: namespace ``audit-good`` passes every item a cluster answers,
``audit-bad`` fails each for its own reason (replicas not spread, a budget that blocks a drain, a grace period
shorter than the checkpoint save, a GPU Job retried ten times). Kept apart from ``kube_seed`` so the backup and
restore tests' counts of the team namespaces stay as they are.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from drtool_lab.components.kube_apiserver import KubeAccess
from drtool_lab.kube_seed import KubeClient

GOOD, BAD = "audit-good", "audit-bad"


def seed(access: KubeAccess) -> None:
    """Create the examples (idempotent: what exists is left as it is)."""
    client = KubeClient(access)
    for doc in yaml.safe_load_all(Path(__file__).with_name("kube_seed_audit.yaml").read_text()):
        if doc:
            client.create(doc, read_existing=False)
