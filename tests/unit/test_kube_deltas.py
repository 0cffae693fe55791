"""Replaying a Kubernetes chain's deltas onto a full (drtool/kube/deltas.py), without a server: the last change
of each object wins, a deletion removes, a relist's sync drops what it does not name, a point stops the replay."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from drtool.errors import IntegrityError
from drtool.kube.deltas import DEL, PUT, SYNC, Changes, Event, merged, reaches
from drtool.kube.objects import object_key
from drtool.points import Point


def rec(key: str, value: str) -> dict[str, Any]:
    ns, _, name = key.rpartition("/")
    return {"object": {"metadata": {"name": name, "namespace": ns}, "data": {"v": value}}, "uid": f"u-{key}"}


def put(key: str, value: str, rv: int, at: str = "2026-12-05T10:00:00Z") -> Event:
    return Event(PUT, "configmaps", key, f"u-{key}", str(rv), at, rec(key, value))


def delete(key: str, rv: int, at: str = "2026-12-05T10:00:00Z") -> Event:
    return Event(DEL, "configmaps", key, f"u-{key}", str(rv), at)


def view(full: list[dict[str, Any]], events: list[Event]) -> dict[str, str]:
    changes = Changes()
    for e in events:
        changes.add(e)
    out = merged(iter(full), changes.last.get("configmaps", {}), changes.synced.get("configmaps"))
    return {object_key(r["object"]): r["object"]["data"]["v"] for r in out}


def test_last_change_wins_deletions_remove_and_new_objects_merge_in_key_order() -> None:
    full = [rec("a/x", "1"), rec("b/y", "1"), rec("c/z", "1")]
    events = [put("a/x", "2", 10), delete("b/y", 11), put("b/w", "1", 12), put("a/x", "3", 13), put("d/q", "1", 14)]
    out = view(full, events)
    assert out == {"a/x": "3", "b/w": "1", "c/z": "1", "d/q": "1"}
    assert list(out) == sorted(out), "a fold keeps the full's key order (unchanged clusters dedup in the store)"


def test_a_sync_after_a_relist_drops_what_it_does_not_name_but_keeps_later_puts() -> None:
    full = [rec("a/x", "1"), rec("b/y", "1")]
    sync = Event(SYNC, "configmaps", "", "", "20", "2026-12-05T10:00:00Z", keys=("a/x",))
    assert view(full, [put("c/n", "1", 15), sync, put("e/late", "1", 21)]) == {"a/x": "1", "e/late": "1"}


def test_a_recreated_object_is_the_new_one() -> None:
    assert view([rec("a/x", "old")], [delete("a/x", 5), put("a/x", "new", 6)]) == {"a/x": "new"}


def test_a_point_stops_the_replay_by_time_or_resource_version() -> None:
    early, late = put("a/x", "2", 10, "2026-12-05T10:00:00Z"), put("a/x", "3", 20, "2026-12-05T10:00:05Z")
    at = Point(time=dt.datetime(2026, 12, 5, 10, 0, 1, tzinfo=dt.UTC))
    assert [reaches(e, at) for e in (early, late)] == [True, False]
    assert [reaches(e, Point(position=10)) for e in (early, late)] == [True, False]
    assert all(reaches(e, Point()) for e in (early, late))


def test_a_malformed_event_is_refused_in_one_line() -> None:
    with pytest.raises(IntegrityError, match="malformed event"):
        Event.parse({"op": "put", "type": "configmaps", "key": "a/x", "at": "2026-12-05T10:00:00Z"})  # no record
    with pytest.raises(IntegrityError, match="malformed event"):
        Event.parse({"op": "sync", "type": "configmaps", "key": "", "at": "2026-12-05T10:00:00Z"})  # no keys
    line = put("a/x", "1", 3).line()
    assert Event.parse(json.loads(line)) == put("a/x", "1", 3)
