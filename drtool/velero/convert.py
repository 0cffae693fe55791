"""A Velero backup's objects as the kubernetes plugin's artifacts, so its restore, verify, dependencies and the
independence analysis read them as they read a backup drtool made.

Per type, what ``drtool.kube.listing`` writes for a listed type: one ``resources/<group>/<resource>.ndjson``
of records (``objects.to_record``: the object cleaned, its status, uid and owner references kept apart) in
``namespace/name`` order, with the type's meta; the same default skips (``skips.py``: whole types such as
events and nodes, objects a controller recreates), the latter recorded in ``left/`` artifacts with their
owner. What drtool learns from discovery on a live cluster comes from the backup instead: the version and
kind from the objects; whether a type is a custom resource, its storage version and its /status subresource
from the CRDs in the backup; for built-in types, a /status subresource wherever their objects carry a status.
The failure-domain facts come from the backup's objects through the readers the kubernetes plugin uses on a
live cluster (``drtool.kube.domain_facts``: node addresses and pod ranges, Service ranges and addresses,
ingress hosts, the DNS suffix), each with its evidence naming the Velero backup, as far as Velero backed those
types up (nodes only with cluster-scoped resources). The API server's address is not in a Velero backup: the
importer records it only when given (``--source-server``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from drtool.kube import domain_facts
from drtool.kube.discovery import CRDS, CrdInfo, ResourceType, crd_info
from drtool.kube.left import artifact_meta, artifact_name, record_line
from drtool.kube.listing import TypeResult
from drtool.kube.objects import dumps, object_key, to_record
from drtool.kube.skips import object_rule, resource_skip_reason
from drtool.plugin.contract import BackupContext

from .tarball import Resource, Tarball

Obj = dict[str, Any]


def resource_type(r: Resource, crds: dict[tuple[str, str], CrdInfo]) -> ResourceType:
    first = r.items[0]
    crd = crds.get((r.group, r.resource))
    version = first["apiVersion"].rpartition("/")[2]
    has_status = version in crd.status_versions if crd else any("status" in obj for obj in r.items)
    return ResourceType(
        group=r.group,
        version=version,
        resource=r.resource,
        kind=first["kind"],
        namespaced=r.namespaced,
        status=has_status,
        crd=crd is not None,
        storage_version=crd.storage_version if crd else None,
    )


def write_artifacts(tarball: Tarball, ctx: BackupContext, backup: str = "") -> dict[str, Any]:
    """Write every type's artifacts; return the kubernetes plugin's outcome meta for them (``backup``: the
    Velero backup's name, for the failure-domain evidence)."""
    crd_objects = tarball.resources.get(CRDS)
    crds = {(i.group, i.plural): i for i in (crd_info(c) for c in (crd_objects.items if crd_objects else []))}
    with_selector = {object_key(s) for s in _items(tarball, "services") if (s.get("spec") or {}).get("selector")}
    progress = ctx.progress("objects", tarball.objects)
    results, skipped = [], {}
    for key, r in sorted(tarball.resources.items()):
        reason = resource_skip_reason(r.resource, r.group)
        if reason:
            skipped[key] = f"{reason} ({len(r.items)} in the Velero backup, not imported)"
            continue
        t = resource_type(r, crds)
        results.append(_write_type(ctx, t, sorted(r.items, key=object_key), object_rule(key, with_selector)))
        progress.advance(len(r.items))
    with contextlib.suppress(AttributeError):
        progress.done()
    facts = domain_facts.from_objects({k: r.items for k, r in tarball.resources.items()}, f" (Velero backup {backup})")
    return {
        "server": None,
        "server_version": None,
        "objects": sum(r.count for r in results),
        "resources": {r.type.key: r.meta() for r in results},
        "empty_resources": [],
        "skipped_resources": skipped,
        "unavailable_apis": [],
        "filters": {},
        "failure_domain": facts.domain(),
        "failure_domain_evidence": facts.evidence,
    }


def _write_type(ctx: BackupContext, t: ResourceType, items: list[Obj], rule: Any) -> TypeResult:
    result = TypeResult(t)
    lines, left_lines = [], []
    for obj in items:
        reason = rule(obj) if rule else None
        if reason:
            result.skipped[reason] = result.skipped.get(reason, 0) + 1
            line = record_line(obj, t, reason)
            if line is not None:
                left_lines.append(line)
                result.left += 1
            continue
        lines.append(dumps(to_record(obj, t)) + b"\n")
        result.count += 1
    if lines:
        with ctx.artifact(t.artifact, meta=t.meta(), sensitive=t.key == "secrets") as sink:
            sink.write(b"".join(lines))
    if left_lines:
        with ctx.artifact(artifact_name(t), meta=artifact_meta(t), sensitive=False) as sink:
            sink.write(b"".join(left_lines))
    return result


def _items(tarball: Tarball, key: str) -> list[Obj]:
    found = tarball.resources.get(key)
    return found.items if found else []
