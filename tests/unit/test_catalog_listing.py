"""What `drtool schedule list` counts a set's RPO age from: its newest complete backup, read from the catalog."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlmodel import Session

from drtool.catalog.db import Catalog
from drtool.catalog.listing import newest_complete
from drtool.catalog.models import BackupRow

SKEW = dt.timedelta(minutes=5)


def row(backup_id: str, finished: str) -> BackupRow:
    return BackupRow(id=backup_id, store_id="s", started=finished, finished=finished, status="complete",
                     backup_set="nightly")  # fmt: skip


def test_of_two_backups_made_in_one_second_the_later_finished_is_the_newest() -> None:
    """Ids of one second sort by their random suffix; here the later backup has the smaller one (CI made two
    backups of a set within a second and `latest` restored the older: the same holds for the RPO age)."""
    earlier = row("20261205T232104Z-ffffff", "2026-12-05T23:21:04.300000Z")
    later = row("20261205T232104Z-000000", "2026-12-05T23:21:04.900000Z")
    stored = {r.id: dt.datetime(2026, 12, 5, 23, 21, 5, tzinfo=dt.UTC) for r in (earlier, later)}
    in_id_order = sorted([earlier, later], key=lambda r: r.id)  # whatever order the rows come in
    assert newest_complete(in_id_order, ["nightly"], stored, SKEW)["nightly"].id == later.id
    next_second = row("20261205T232105Z-000001", "2026-12-05T23:21:05.100000Z")
    stored[next_second.id] = stored[later.id]
    assert newest_complete([*in_id_order, next_second], ["nightly"], stored, SKEW)["nightly"].id == next_second.id


def test_the_catalog_lists_backups_of_one_second_in_the_order_they_were_made(tmp_path: Path) -> None:
    """`drtool list` read the catalog in id order, so two backups of one second came in suffix order."""
    earlier = row("20261205T232104Z-ffffff", "2026-12-05T23:21:04.300000Z")
    later = row("20261205T232104Z-000000", "2026-12-05T23:21:04.900000Z")
    made = [earlier.id, later.id]
    catalog = Catalog(str(tmp_path / "catalog.db"))
    try:
        with Session(catalog.engine) as session:
            session.add_all([later, earlier])
            session.commit()
        assert [r.id for r in catalog.backups("s")] == made
    finally:
        catalog.close()
