"""Retention against hand-computed tables: a year of daily backups through GFS, keep-last, keep-within, tags."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from drtool.retention import BackupRef, RetentionPolicy, decide

UTC = dt.UTC


def daily_2025(tags: dict[str, tuple[str, ...]] | None = None) -> list[BackupRef]:
    """One backup at 02:00 UTC every day of 2025 (365 backups); ids sort like times, as in a real store."""
    day, out = dt.datetime(2025, 1, 1, 2, tzinfo=UTC), []
    while day.year == 2025:
        bid = f"{day:%Y%m%dT%H%M%SZ}-000000"
        out.append(BackupRef(id=bid, time=day, tags=(tags or {}).get(f"{day:%m-%d}", ())))
        day += dt.timedelta(days=1)
    return out


def kept_days(decisions) -> list[str]:
    return sorted(f"{d.backup.time:%m-%d}" for d in decisions if d.keep)


NEW_YEAR = dt.datetime(2026, 1, 1, tzinfo=UTC)


def test_gfs_year_of_daily_backups() -> None:
    policy = RetentionPolicy(keep_daily=7, keep_weekly=4, keep_monthly=12, keep_yearly=3)
    decisions = decide(daily_2025(), policy, NEW_YEAR)
    # by hand: daily = Dec 25..31; weekly = newest of ISO weeks 2026-W01 (Dec 31), W52 (Dec 28), W51 (Dec 21),
    # W50 (Dec 14); monthly = the last day of each month; yearly = Dec 31 (only 2025 exists)
    month_ends = ["01-31", "02-28", "03-31", "04-30", "05-31", "06-30", "07-31", "08-31", "09-30", "10-31", "11-30"]
    expected = sorted(month_ends + ["12-14", "12-21"] + [f"12-{d}" for d in range(25, 32)])
    assert kept_days(decisions) == expected
    assert len([d for d in decisions if not d.keep]) == 365 - 20
    by_day = {f"{d.backup.time:%m-%d}": d for d in decisions}
    assert by_day["12-31"].reasons == (
        "newest complete backup of the set",
        "daily #1 (2025-12-31)",
        "weekly #1 (2026-W01)",
        "monthly #1 (2025-12)",
        "yearly #1 (2025)",
    )
    assert by_day["12-28"].reasons == ("daily #4 (2025-12-28)", "weekly #2 (2025-W52)")
    assert by_day["12-14"].reasons == ("weekly #4 (2025-W50)",)
    assert by_day["02-28"].reasons == ("monthly #11 (2025-02)",)
    assert by_day["12-24"].reasons == ("no rule keeps it",)
    assert by_day["01-31"].reasons == ("monthly #12 (2025-01)",)


def test_milestones_are_never_pruned_and_do_not_use_a_slot() -> None:
    backups = daily_2025(tags={"03-15": ("milestone", "pre-upgrade"), "12-30": ("milestone",)})
    decisions = decide(backups, RetentionPolicy(keep_last=1), NEW_YEAR)
    assert kept_days(decisions) == ["03-15", "12-30", "12-31"]
    by_day = {f"{d.backup.time:%m-%d}": d for d in decisions}
    assert by_day["03-15"].reasons == ("tagged milestone (never pruned)",)
    assert by_day["12-31"].reasons == ("newest complete backup of the set", "last #1")


def test_custom_keep_tags() -> None:
    backups = daily_2025(tags={"06-01": ("release-1.0",), "06-02": ("milestone",)})
    decisions = decide(backups, RetentionPolicy(keep_last=2, keep_tags=["release-1.0"]), NEW_YEAR)
    assert kept_days(decisions) == ["06-01", "12-30", "12-31"]


def test_keep_within_is_measured_from_now() -> None:
    decisions = decide(daily_2025(), RetentionPolicy(keep_within="3d12h"), dt.datetime(2025, 12, 31, 12, tzinfo=UTC))
    # 3.5 days back from Dec 31 12:00 is Dec 28 00:00: Dec 28, 29, 30, 31 (02:00 each)
    assert kept_days(decisions) == ["12-28", "12-29", "12-30", "12-31"]
    assert any("within 84h00m of now" in r for r in decisions[1].reasons)


def test_hourly_buckets_keep_the_newest_of_each_hour() -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    backups = [BackupRef(id=f"b{i:03d}", time=start + dt.timedelta(minutes=20 * i)) for i in range(12)]  # 4 hours
    decisions = decide(backups, RetentionPolicy(keep_hourly=3), start + dt.timedelta(hours=5))
    kept = sorted(d.backup.id for d in decisions if d.keep)
    assert kept == ["b005", "b008", "b011"]  # xx:40 of hours 1, 2 and 3; hour 0's newest (b002) is beyond 3


def test_partial_backups_never_take_a_slot_and_newest_complete_is_always_kept() -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    backups = [
        BackupRef(id="a", time=start),
        BackupRef(id="b", time=start + dt.timedelta(days=1)),
        BackupRef(id="c", time=start + dt.timedelta(days=2), complete=False),
        BackupRef(id="d", time=start + dt.timedelta(days=3), complete=False),
    ]
    decisions = {d.backup.id: d for d in decide(backups, RetentionPolicy(keep_daily=1), start + dt.timedelta(days=9))}
    assert decisions["b"].keep and decisions["b"].reasons[0] == "newest complete backup of the set"
    assert not decisions["a"].keep
    assert not decisions["d"].keep and decisions["d"].reasons == ("partial, and outside keep_within",)


def test_empty_policy_keeps_everything() -> None:
    decisions = decide(daily_2025(), RetentionPolicy(), NEW_YEAR)
    assert all(d.keep for d in decisions)
    assert decisions[0].reasons == ("no retention policy: everything is kept",)


def test_keep_zero_and_unknown_keys() -> None:
    decisions = decide(daily_2025(), RetentionPolicy(keep_daily=0), NEW_YEAR)
    assert kept_days(decisions) == ["12-31"]  # the newest complete one survives any policy
    with pytest.raises(ValidationError):
        RetentionPolicy.model_validate({"keep_dayly": 7})
    with pytest.raises(ValidationError):
        RetentionPolicy.model_validate({"keep_last": -1})
