"""Did the etcd restore really work? Checks against the restored member, the marker and the backup's facts.

The checks need nothing from the source cluster (a rehearsal runs with the source unreachable), except
the optional key-by-key comparison (``compare_with``), which reads the source at the snapshot revision:
run it soon after the backup, since a live source compacts old revisions (kube-apiserver every 5 min).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from drtool.errors import DrtoolError, UsageError
from drtool.plugin.contract import Check, RestoreContext

from .client import EtcdClient, EtcdSettings, unb64
from .restore import RestoreSpec, backup_meta, read_marker

COMPARED_FIELDS = ("value", "create_revision", "mod_revision", "version", "lease")
MAX_EXAMPLES = 5


def target_settings(target: Mapping[str, Any], marker: Mapping[str, Any] | None) -> EtcdSettings:
    """How to reach the restored etcd: the target's own ``endpoints``, else what the restore recorded.

    ETCD_* variables are deliberately not consulted: in a drtool run they point at the SOURCE cluster.
    """
    if target.get("endpoints"):
        return EtcdSettings.from_mapping(target, environ={})
    client = (marker or {}).get("client") or {}
    if not client.get("endpoints"):
        raise UsageError("no endpoint for the restored etcd", "give target `endpoints`, or restore with `start: true`")
    return EtcdSettings.from_mapping(client, environ={})


def run_verify(ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
    """Read the new member back; ``options`` are the restore's and change nothing here."""
    marker = read_marker(RestoreSpec.parse(target, {}).marker_path) if target.get("data_dir") else None
    facts = _Facts(marker, backup_meta(ctx))
    try:
        settings = target_settings(target, marker)
    except DrtoolError as exc:
        return [Check("etcd healthy", False, exc.one_line())]
    with EtcdClient(settings) as client:
        health = _guard("etcd healthy", lambda: _health(client))
        if not health.ok:
            return [health]
        checks = [health]
        try:
            for name, check in _checks(client, facts, target):
                checks.append(_guard(name, check))
        except DrtoolError as exc:  # the status read that every check needs failed
            checks.append(Check("etcd status", False, exc.one_line()))
    return checks


class _Facts:
    """Expected values, from the restore marker first and the backup's recorded meta second."""

    def __init__(self, marker: Mapping[str, Any] | None, meta: Mapping[str, Any]) -> None:
        self.marker = marker or {}
        # a point-in-time restore records what the replayed state must hold; the full's own facts are older
        self.meta = {**meta, **(self.marker.get("expected") or {})}
        self.point: Mapping[str, Any] | None = self.marker.get("point_in_time")
        exact = meta.get("revision") if meta.get("revision_exact") else None
        self.snapshot_revision: int | None = (self.marker.get("snapshot") or {}).get("revision") or exact
        self.restored_revision: int | None = self.marker.get("restored_revision") or self.snapshot_revision
        self.bumped = bool((self.marker.get("bump_revision") or {}).get("applied"))
        self.source_cluster_id = meta.get("cluster_id") or self.marker.get("source_cluster_id")


def _guard(name: str, check: Callable[[], Check | tuple[bool, str]]) -> Check:
    """A check that cannot run is a failed check with the reason, not an exception."""
    try:
        result = check()
    except DrtoolError as exc:
        return Check(name, False, exc.one_line())
    return result if isinstance(result, Check) else Check(name, *result)


def _checks(client: EtcdClient, facts: _Facts, target: Mapping[str, Any]) -> Iterator[tuple[str, Callable]]:
    status = client.status()
    if facts.point:
        yield "point in time: deltas continuous", lambda: _point(facts.point)  # type: ignore[arg-type]
    if facts.restored_revision:
        yield "revision equals the snapshot's", lambda: _revision(status, facts)
    if facts.source_cluster_id:
        yield "new cluster identity", lambda: _identity(status, facts)
    if facts.meta.get("keys") is not None and facts.restored_revision:
        yield "key count equals the backup's", lambda: _key_count(client, facts)
    if facts.snapshot_revision:
        yield "hashkv", lambda: _hashkv(client, facts)
    if target.get("compare_with") and facts.snapshot_revision:
        yield "every key equals the source's", lambda: _compare(client, target["compare_with"], facts)


def _health(client: EtcdClient) -> tuple[bool, str]:
    ok, reason = client.healthy()
    return ok, f"{client.endpoint}: {reason or 'healthy'}"


def _revision(status: Mapping[str, Any], facts: _Facts) -> tuple[bool, str]:
    actual = int(status["header"]["revision"])
    expected = facts.restored_revision
    how = f" (snapshot {facts.snapshot_revision} + bump)" if facts.bumped else ""
    if actual == expected:
        return True, f"revision {actual}{how}"
    moved = "; written to since the restore?" if expected and actual > expected else ""
    return False, f"revision {actual}, expected {expected}{how}{moved}"


def _point(point: Mapping[str, Any]) -> tuple[bool, str]:
    """The replay's own proof, recorded by the restore (it refuses gaps and divergence outright)."""
    asked = f"asked {point.get('asked')}: " if point.get("asked") else ""
    return True, (
        f"{asked}full {point['base_backup']} at revision {point['base_revision']} + {point['revisions']} revision(s) "
        f"from {len(point['deltas'])} delta(s), up to revision {point['revision']} ({point['continuity']})"
    )


def _identity(status: Mapping[str, Any], facts: _Facts) -> tuple[bool, str]:
    """A restore must start a NEW cluster: members of the old one must never be able to join it."""
    cluster_id = status["header"].get("cluster_id")
    if cluster_id == facts.source_cluster_id:
        return False, f"cluster id {cluster_id} is the source's; restore with a new initial_cluster_token"
    return True, f"cluster id {cluster_id} (source {facts.source_cluster_id})"


def _key_count(client: EtcdClient, facts: _Facts) -> tuple[bool, str]:
    assert facts.restored_revision is not None
    count, expected = client.count(facts.restored_revision), int(facts.meta["keys"])
    return count == expected, f"{count} keys at revision {facts.restored_revision}, backup had {expected}"


def _hashkv(client: EtcdClient, facts: _Facts) -> tuple[bool, str]:
    """HashKV at the snapshot revision must equal the source's at backup time (same history, same hash).

    A bumped restore has compacted that revision away, so only the restored revision's hash is shown.
    """
    assert facts.snapshot_revision is not None
    if facts.bumped:
        got = client.hashkv(facts.restored_revision or 0)
        return got is not None, f"hashkv at revision {facts.restored_revision}: {got}"
    got, recorded = client.hashkv(facts.snapshot_revision), facts.meta.get("hashkv")
    if got is None:
        return False, f"etcd gave no hashkv at revision {facts.snapshot_revision}"
    if not recorded or recorded.get("compact_revision") != got["compact_revision"]:
        return True, f"hashkv {got['hash']} at revision {facts.snapshot_revision} (no comparable hash recorded)"
    same = recorded["hash"] == got["hash"]
    return same, f"hashkv {got['hash']} at revision {facts.snapshot_revision}, backup recorded {recorded['hash']}"


def _compare(client: EtcdClient, source: Mapping[str, Any], facts: _Facts) -> tuple[bool, str]:
    """Walk both keyspaces in key order, one page each at a time, and compare every key and its metadata."""
    assert facts.snapshot_revision is not None and facts.restored_revision is not None
    with EtcdClient(EtcdSettings.from_mapping(source)) as src:
        compared, problems, examples = compare_keyspaces(
            src.iter_kvs(facts.snapshot_revision), client.iter_kvs(facts.restored_revision)
        )
    where = f"source@{facts.snapshot_revision} vs target@{facts.restored_revision}"
    if problems:
        return False, f"{problems} difference(s) in {compared} keys ({where}), e.g. {'; '.join(examples)}"
    return True, f"{compared} keys equal ({where})"


def compare_keyspaces(
    source: Iterator[Mapping[str, Any]], target: Iterator[Mapping[str, Any]]
) -> tuple[int, int, list[str]]:
    """Merge-walk two key-ordered streams: (keys seen, differences, a few examples). Values are never shown."""
    compared, problems, examples = 0, 0, []
    src, dst = next(source, None), next(target, None)
    while src is not None or dst is not None:
        ks = unb64(src["key"]) if src is not None else None
        kd = unb64(dst["key"]) if dst is not None else None
        compared += 1
        if kd is None or (ks is not None and ks < kd):
            problem, src = f"{_show(ks)} missing on target", next(source, None)
        elif ks is None or kd < ks:
            problem, dst = f"{_show(kd)} not in source", next(target, None)
        else:
            fields = [f for f in COMPARED_FIELDS if src.get(f) != dst.get(f)]  # type: ignore[union-attr]
            problem = f"{_show(ks)} differs in {', '.join(fields)}" if fields else ""
            src, dst = next(source, None), next(target, None)
        if problem:
            problems += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append(problem)
    return compared, problems, examples


def _show(key: bytes | None) -> str:
    text = repr(key)[2:-1] if key is not None else "?"
    return text if len(text) <= 80 else text[:77] + "..."
