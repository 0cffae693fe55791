"""`drtool import velero`: a Velero backup written into drtool's encrypted store as a kubernetes backup.

The order is the point. The backup is fetched and checked completely first (``backup.read_backup``: phase,
format version, gzip and tar integrity, resource list and item count), with the store untouched; only then is
a backup session opened and the artifacts written, and the manifest, written last by ``commit``, is what
makes the backup exist. A failure before the commit leaves no manifest, so nothing becomes visible (chunks a
failed session stored are unreferenced and go with the next prune).

The plugin outcome's times are Velero's: ``started`` and ``finished`` say when Velero read the cluster, so a
rehearsal's RPO is the age of that state, not of the import. The manifest's own times are the import's (the
store checks those against its clock: docs/threat-model.md, "Forged backup times").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from drtool.progress import Progress
from drtool.repo.manifest import Manifest, PluginOutcome
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession, merge_facts

from .backup import Provenance, VeleroBackup, read_backup
from .convert import write_artifacts

PLUGIN = "kubernetes"
IMPORT_TAG = "imported-from-velero"


@dataclasses.dataclass(frozen=True)
class Imported:
    manifest: Manifest
    provenance: Provenance
    not_captured: list[str]


def import_backup(
    repo: Repository,
    url: str,
    name: str,
    *,
    backup_set: str | None = None,
    tags: Sequence[str] = (),
    source_server: str | None = None,
    progress: Progress | None = None,
) -> Imported:
    """Import Velero backup ``name`` from the storage location at ``url`` (``s3://bucket/prefix`` or a path).

    ``source_server``: the source cluster's API server URL, which Velero does not record; given, it joins the
    failure-domain facts the independence analysis judges a restore against.
    """
    velero = read_backup(url, name)
    not_captured = what_velero_left_out(velero)
    with BackupSession(repo, backup_set=backup_set, tags=[IMPORT_TAG, *tags], progress=progress) as session:
        meta = write_artifacts(velero.tarball, session.context_for(PLUGIN), name)
        facts = meta.pop("failure_domain")
        if source_server:
            facts.setdefault("kubernetes_api_endpoints", []).append(source_server)
            meta["failure_domain_evidence"].setdefault("kubernetes_api_endpoints", "given to drtool import velero")
        merge_facts(session.failure_domain, facts)
        meta["server"] = source_server
        meta["server_version"] = velero.provenance.source_kubernetes_version
        meta["imported_from"] = velero.provenance.as_meta() | {"not_captured": not_captured}
        p = velero.provenance
        session.outcomes[PLUGIN] = PluginOutcome(
            status="ok", started=p.started or p.completed, finished=p.completed, meta=meta
        )
        manifest = session.commit()
    return Imported(manifest, velero.provenance, not_captured)


def what_velero_left_out(velero: VeleroBackup) -> list[str]:
    """What this backup does not hold although drtool's own backup of the cluster would, each as one line:
    Velero's filters, volume data (not imported), and what no Velero backup records."""
    spec, status = velero.provenance.spec, velero.status
    out = []
    for key, what in (
        ("Namespaces", "namespaces"),
        ("Resources", "resources"),
        ("ClusterScopedResources", "cluster-scoped resources"),
        ("NamespaceScopedResources", "namespaced resources"),
    ):
        for side, verb in (("included", "backed up only the"), ("excluded", "left out the")):
            values = [v for v in spec.get(f"{side}{key}") or [] if v != "*"]
            if values:
                out.append(f"Velero {verb} {what} {', '.join(values)} (its backup's spec)")
    if spec.get("includeClusterResources") is False:
        out.append("Velero was asked to leave cluster-scoped resources out")
    elif _cluster_scoped_left_out(spec):
        out.append(
            "cluster-scoped resources: Velero backed up only namespaces and what its actions pulled in (CRDs of "
            "backed-up custom resources, ClusterRoles of ServiceAccounts); its default since it excludes CSI "
            "snapshot contents itself, unless `velero backup create --include-cluster-resources`"
        )
    for key in ("labelSelector", "orLabelSelectors"):
        if spec.get(key):
            out.append(f"Velero backed up only objects matching its {key} {spec[key]}")
    volumes = _volume_counts(status)
    if volumes:
        out.append(f"volume data ({volumes}): not imported, drtool imports objects only")
    out.append("the source API server's address: not in a Velero backup (give --source-server)")
    out.append("each type's resourceVersion and whether a LIST was consistent: not in a Velero backup")
    return out


def _cluster_scoped_left_out(spec: dict[str, Any]) -> bool:
    """Velero v1.18's rule (pkg/util/collections/includes_excludes.go, ScopeIncludesExcludes.ShouldInclude):
    with the new-style filters, all cluster-scoped types are backed up only when no cluster-scoped include or
    exclude is set; its backup controller always adds the exclude of volumesnapshotcontents itself
    (pkg/controller/backup_controller.go, autoExcludeClusterScopedResources), so a plain backup has one."""
    old_style = (
        spec.get("includeClusterResources") is not None
        or spec.get("includedResources")
        or spec.get("excludedResources")
    )
    included = [v for v in spec.get("includedClusterScopedResources") or [] if v]
    return not old_style and not included and bool(spec.get("excludedClusterScopedResources"))


def _volume_counts(status: dict[str, Any]) -> str:
    counts = {
        "volume snapshots": status.get("volumeSnapshotsAttempted"),
        "CSI snapshots": status.get("csiVolumeSnapshotsAttempted"),
        "item operations": status.get("backupItemOperationsAttempted"),
    }
    return ", ".join(f"{n} {what}" for what, n in counts.items() if n)
