"""The standby contract's state survives the core's JSON round trip unchanged (it is persisted between links)."""

from __future__ import annotations

import json

from drtool.plugin.contract import Deferral, StandbyState, Tracked


def test_standby_state_round_trips_through_json() -> None:
    state = StandbyState(
        plugin="kubernetes",
        chain="20261205T170000Z-ab12",
        seq=3,
        link="20261205T170010Z-cd34",
        link_time="2026-12-05T17:00:10.000000Z",
        objects={"deployments.apps team/web": Tracked("u-src", "u-tgt", "812")},
        held={"deployments.apps team/web": {"spec.replicas": 3}},
        deferred={"configmaps team/old": Deferral("u-old", "2026-12-05T17:00:05.000000Z")},
    )
    again = StandbyState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state
    assert isinstance(again.objects["deployments.apps team/web"], Tracked)


def test_standby_state_from_an_empty_record_is_a_standby_that_applied_nothing() -> None:
    state = StandbyState.from_json({"plugin": "kueue", "unknown_later_field": 1})
    assert (state.seq, state.link, state.objects, state.deferred) == (-1, None, {}, {})
