"""Restoring into another Kubernetes version: every type of a backup resolved against what the target serves.

A backup holds each type in one version (built-ins in the source's preferred version, custom resources in
their CRD's storage version: ``discovery``). A target that runs another Kubernetes release, or whose
operator installed a newer CRD, may not serve that version. Before anything is written, each type is
resolved (docs/restore-into-another-cluster.md, "Another Kubernetes version"):

- served in the backup's version, or its CRD comes with the backup and the target has none: as it is;
- another version of the same group, resource and kind is served: its objects are sent in the target's
  version (preferred, or the CRD's storage version), their ``apiVersion`` rewritten (``artifacts.records``
  writes each record in its type's version). A rewrite converts only where both versions' schemas agree on
  the objects, so each object is first put through the target's own validation (a server-side dry run
  with strict field validation); one the target would reject refuses the restore, naming the type, both
  versions and the server's message. A custom resource whose target CRD converts with a webhook is refused
  instead: the webhook, not a rewrite, knows the conversion, and it does not run before its operator does.
- served in no version: refused by name, with what to do.

A CRD of the backup whose target already has a CRD that does not serve the backup's stored version is the
target operator's newer CRD: it is kept, not overwritten with the older one (whose versions the target's
stored objects may no longer fit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from drtool.errors import UsageError
from drtool.plugin.contract import RestoreContext

from .artifacts import records
from .client import APPLY_PATCH, FIELD_MANAGER, ApiError, KubeClient
from .discovery import CRD_PATH, CRDS, ResourceType, crd_index, discover, served_versions
from .objects import dumps, object_key

MAX_REFUSED = 3  # refused types named in the one error line
CHECK_NAMESPACE = "default"  # where a converted object is dry-run: its own may arrive with this restore


@dataclasses.dataclass(frozen=True)
class Converted:
    """A type of the backup restored through another version the target serves."""

    key: str
    backup: str  # the backup's apiVersion
    target: str  # the target's
    how: str  # "apiVersion rewrite, validated by the target" (built-ins, CRDs with conversion None)


@dataclasses.dataclass
class VersionPlan:
    """The backup's types as the target serves them, what was converted, and the target's CRDs kept."""

    types: list[ResourceType]
    converted: list[Converted] = dataclasses.field(default_factory=list)
    kept_crds: dict[str, str] = dataclasses.field(default_factory=dict)  # CRD name -> why the target's is kept

    def details(self) -> dict[str, Any]:
        return {
            "converted": [f"{c.key}: {c.backup} -> {c.target} ({c.how})" for c in self.converted],
            "target_crds_kept": [f"{name}: {why}" for name, why in sorted(self.kept_crds.items())],
        }

    def summary(self) -> str:
        parts = [f"{c.key} {c.backup} -> {c.target}" for c in self.converted]
        parts += [f"CRD {n} kept from the target" for n in sorted(self.kept_crds)]
        return f"; other API versions: {', '.join(parts)}" if parts else ""


def resolve(client: KubeClient, types: Iterable[ResourceType], backup_crds: Collection[str]) -> VersionPlan:
    """Each type in a version the target serves, or a UsageError naming every type that cannot be restored
    (nothing has been written). ``backup_crds``: the names of the CRDs the backup holds."""
    served = served_versions(client)
    target_crds = crd_index(client)
    preferred = {(t.group, t.resource): t for t in discover(client, target_crds)[0]}
    plan = VersionPlan(types=[])
    refused: list[str] = []
    for t in types:
        crd_name = f"{t.resource}.{t.group}"
        versions = served.get((t.group, t.resource), ())
        if t.version in versions or (t.crd and crd_name in backup_crds and (t.group, t.resource) not in target_crds):
            plan.types.append(t)
            continue
        there = preferred.get((t.group, t.resource))
        if there is None or there.kind != t.kind:
            refused.append(_not_served(t, crd_name in backup_crds))
            continue
        if t.crd:
            crd = client.get(f"{CRD_PATH}/{crd_name}")
            strategy = ((crd["spec"].get("conversion") or {}).get("strategy")) or "None"
            if strategy != "None":
                refused.append(_webhook(t, there, crd_name))
                continue
            if crd_name in backup_crds:
                plan.kept_crds[crd_name] = f"serves {', '.join(versions)}, the backup stored {t.version}"
        plan.types.append(there)
        plan.converted.append(Converted(t.key, t.api_version, there.api_version, "apiVersion rewrite, validated"))
    if refused:
        more = f" (+{len(refused) - MAX_REFUSED} more)" if len(refused) > MAX_REFUSED else ""
        raise UsageError(
            f"{len(refused)} type(s) of the backup cannot be restored into {client.server}: "
            f"{'; '.join(refused[:MAX_REFUSED])}{more}; nothing was written",
            "docs/restore-into-another-cluster.md, 'Another Kubernetes version'",
        )
    return plan


def _not_served(t: ResourceType, crd_in_backup: bool) -> str:
    if t.crd:
        how = "its CRD in the target lacks it" if crd_in_backup else "install its CRD in the target"
        return f"{t.key} {t.api_version}: the target serves no version of it ({how}, or leave it out with a filter)"
    return (
        f"{t.key} {t.api_version}: the target's Kubernetes serves no version of it (enable the API with "
        f"--runtime-config={t.api_version}=true on its kube-apiserver, or leave it out with a filter)"
    )


def _webhook(t: ResourceType, there: ResourceType, crd_name: str) -> str:
    return (
        f"{t.key} {t.api_version}: the target's CRD {crd_name} no longer serves {t.version} and converts to "
        f"{there.version} with a webhook, which does not run before its operator (set served: true on "
        f"{t.version} in that CRD while restoring, so the API server converts through the webhook)"
    )


def backup_crd_names(ctx: RestoreContext, types: Iterable[ResourceType]) -> set[str]:
    """The names of the CRDs a backup holds (verify has no restore scan to ask)."""
    crds = next((t for t in types if t.key == CRDS), None)
    return {rec["object"]["metadata"]["name"] for rec in records(ctx, crds)} if crds else set()


def check_converted(client: KubeClient, ctx: RestoreContext, plan: VersionPlan) -> None:
    """Every object of a converted type put through the target's validation in its new version (a dry-run
    server-side apply, strict field validation), before anything is written; the first rejection refuses."""
    by_key = {t.key: t for t in plan.types}
    for c in plan.converted:
        t = by_key[c.key]
        for rec in records(ctx, t):
            body = dict(rec["object"])
            meta = {k: v for k, v in body["metadata"].items() if k not in ("ownerReferences", "resourceVersion")}
            body["metadata"] = meta | ({"namespace": CHECK_NAMESPACE} if t.namespaced else {})
            try:
                _dry_run(client, t, body)
            except ApiError as exc:
                raise UsageError(
                    f"{c.key} {object_key(rec['object'])} does not convert from {c.backup} to {c.target} by "
                    f"rewriting its apiVersion: {_field_error(exc)}; nothing was written",
                    "docs/restore-into-another-cluster.md, 'Another Kubernetes version': convert it with its "
                    "operator's tooling, or serve the backup's version in the target while restoring",
                ) from None


def _field_error(exc: ApiError) -> str:
    """The field and what is wrong with it: the last two parts of the server's message
    (``... Kind=Gadget): .spec.color: field not declared in schema``)."""
    return ": ".join(exc.message.split(": ")[-2:])


def _dry_run(client: KubeClient, t: ResourceType, body: dict[str, Any]) -> None:
    params = {"fieldManager": FIELD_MANAGER, "force": "true", "dryRun": "All", "fieldValidation": "Strict"}
    path = t.path(body["metadata"].get("namespace"), body["metadata"]["name"])
    client.request("PATCH", path, params=params, body=dumps(body), content_type=APPLY_PATCH)


def kept_crd(plan: VersionPlan, t: ResourceType, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a CRD of the backup the target's own, newer CRD is kept instead of."""
    return t.key == CRDS and (obj.get("metadata") or {}).get("name") in plan.kept_crds
