"""Did the restore really work? Every backed-up type read back from the target and compared field by field
(``drtool.kube.verify``: what the restore wrote must hold; what the target's controllers added
is listed), the objects left to controllers checked for an owner that recreates them, the target's own
webhooks and aggregated APIs checked for answering, then the restored CRDs and namespaces for health."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.kube.artifacts import types_in
from drtool.kube.client import KubeClient
from drtool.kube.discovery import CRDS, ResourceType
from drtool.kube.holds import still_held
from drtool.kube.installed import check_installed, kept
from drtool.kube.left import check_left
from drtool.kube.settings import Connection, RestoreOptions
from drtool.kube.verify import check_type, crds_established, nothing_terminating, settle_deadline
from drtool.kube.versions import VersionPlan, backup_crd_names, resolve
from drtool.plugin.contract import Check, RestoreContext


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    opts = RestoreOptions.parse(target, options)
    if opts.dry_run:
        return []  # a dry run wrote nothing: nothing to check (the verdict says "none", not "passed")
    if opts.release:
        return [_guard("released", lambda: _released(ctx, target, opts))]
    ns_map = dict(opts.namespace_map)
    try:
        client = KubeClient(Connection.from_mapping(target))
        backed_up = types_in(ctx)
        versions = resolve(client, backed_up, backup_crd_names(ctx, backed_up))  # as the restore sent them
        types = versions.types
        deadline = settle_deadline(opts.settle)
        checks = [_guard(t.key, lambda t=t: _check(ctx, client, t, opts, deadline, versions)) for t in types]
        left = _guard("left to controllers", lambda: check_left(ctx, client, types, ns_map))
        checks += [c for c in [left] if c is not None]
        checks.append(_guard("CRDs Established", lambda: crds_established(ctx, client, types)))
        checks.append(_guard("nothing Terminating", lambda: nothing_terminating(ctx, client, types, ns_map)))
    except DrtoolError as exc:
        return [Check("kubernetes: target reachable", False, exc.one_line())]
    return checks


def _check(
    ctx: RestoreContext,
    client: KubeClient,
    t: ResourceType,
    opts: RestoreOptions,
    deadline: float,
    versions: VersionPlan,
) -> Check:
    if kept(t, opts.webhooks):
        return check_installed(ctx, client, t)
    left = versions.kept_crds if t.key == CRDS else None
    return check_type(
        ctx, client, t, opts.transforms, opts.restore_status, settle_until=deadline, held=opts.hold, left_alone=left
    )


def _guard(name: str, fn: Any) -> Any:
    try:
        return fn()
    except DrtoolError as exc:
        return Check(f"kubernetes: {name}", False, exc.one_line())


def _released(ctx: RestoreContext, target: Mapping[str, Any], opts: RestoreOptions) -> Check:
    """After a release step: none of the backup's objects is held any more (completed Jobs' records aside)."""
    held = still_held(ctx, KubeClient(Connection.from_mapping(target)), opts.namespace_map)
    return Check("kubernetes: released", not held, "still held: " + "; ".join(held[:5]) if held else "nothing held")
