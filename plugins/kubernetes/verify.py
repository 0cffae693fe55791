"""Did the restore really work? Every backed-up type read back from the target and compared object by object
(``drtool.plugin.toolkit.kube.verify``), then the restored CRDs and namespaces checked for health."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drtool.errors import DrtoolError
from drtool.plugin.contract import Check, RestoreContext
from drtool.plugin.toolkit.kube.artifacts import types_in
from drtool.plugin.toolkit.kube.client import KubeClient
from drtool.plugin.toolkit.kube.settings import Connection, RestoreOptions
from drtool.plugin.toolkit.kube.verify import check_type, crds_established, nothing_terminating


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    opts = RestoreOptions.parse(target, options)
    if opts.dry_run:
        return [Check("kubernetes: dry run", True, "the restore was a dry run: nothing to verify")]
    ns_map = dict(opts.namespace_map)
    status = opts.restore_status
    try:
        client = KubeClient(Connection.from_mapping(target))
        types = types_in(ctx)
        images = opts.image_registry_map
        checks = [_guard(t.key, lambda t=t: check_type(ctx, client, t, ns_map, status, images)) for t in types]
        checks.append(_guard("CRDs Established", lambda: crds_established(ctx, client, types)))
        checks.append(_guard("nothing Terminating", lambda: nothing_terminating(ctx, client, types, ns_map)))
    except DrtoolError as exc:
        return [Check("kubernetes: target reachable", False, exc.one_line())]
    return checks


def _guard(name: str, fn: Any) -> Check:
    try:
        return fn()
    except DrtoolError as exc:
        return Check(f"kubernetes: {name}", False, exc.one_line())
