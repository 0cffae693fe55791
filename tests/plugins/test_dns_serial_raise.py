"""dns-certs ``serial: raise``: a zone changed in place since the backup (records removed, its serial gone up)
gets the backup's records back under serials above its own, so secondaries follow; verify then holds every
RRset equal and the serial ahead of the backup's. Without the option such a zone is refused, nothing written
(tests/plugins/test_dns_certs.py::test_update_refuses_a_target_serial_ahead)."""

from __future__ import annotations

from typing import Any

import dns.update
import pytest
from drtool_lab.components.bind9 import Bind9Server
from drtool_lab.plugins.dns_certs import SERIAL, ZONE
from drtool_plugins.dns_certs import tsig, zones

from drtool.errors import UsageError
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from tests.fixtures.bind9 import DnsLab
from tests.plugins.test_dns_certs import axfr, backup, plugin


def zone_with(serial: int, records: int = 0) -> zones.RRsets:
    zone = "z."
    out = {(zone, "SOA"): (300, (f"ns1.z. h.z. {serial} 1 1 1 1",))}
    return out | {(f"h{i}.z.", "A"): (300, (f"10.0.{i // 256}.{i % 256}",)) for i in range(records)}


def test_raised_serials_count_up_from_the_targets() -> None:
    plan = zones.plan_update("z.", zone_with(10, 1000), zone_with(12, 1), raise_serial=True)
    assert plan.messages == 3 and plan.serials == [13, 14, 15]
    assert zones.plan_update("z.", zone_with(10, 2), zone_with(4), raise_serial=True).serials == [10]  # behind
    assert zones.plan_update("z.", zone_with(10, 2), zone_with(11, 2), raise_serial=True).empty  # records equal
    with pytest.raises(UsageError, match="ahead of the backup"):
        zones.plan_update("z.", zone_with(10, 2), zone_with(12, 1))


def test_a_zone_with_records_removed_in_place_is_restored_with_a_raised_serial(
    repo: Repository, dns_source: DnsLab, bind9: Bind9Server
) -> None:
    """The target zone holds the backup's content, then loses three names by RFC 2136 (its serial goes up):
    `serial=raise` puts them back and verify passes; the default refuses."""
    bind9.start()
    manifest = backup(repo, {**dns_source.settings, "kubernetes": False})
    target: dict[str, Any] = {"kubernetes": False, "dns_server": bind9.address, "tsig_key_file": str(bind9.key_file)}
    assert not run_restore(repo, manifest, plugin, target).failed
    want = axfr(bind9, bind9.key_file)
    key = tsig.load(str(bind9.key_file))
    assert key is not None
    update = dns.update.UpdateMessage(f"{ZONE}.", **key.kwargs())
    for name in ("asr", "www", "mail"):
        update.delete(name)
    dns.query.tcp(update, "127.0.0.1", port=bind9.port, timeout=10)
    removed = axfr(bind9, bind9.key_file)
    assert len(removed) < len(want)

    with pytest.raises(UsageError, match="ahead of the backup"):
        run_restore(repo, manifest, plugin, target)
    assert axfr(bind9, bind9.key_file) == removed, "nothing was written"
    out = run_restore(repo, manifest, plugin, target, options={"serial": "raise"})

    assert not out.failed, [(c.name, c.detail) for c in out.checks if not c.ok]
    got = axfr(bind9, bind9.key_file)
    soa = (f"{ZONE}.", "SOA")
    assert {k: v for k, v in got.items() if k != soa} == {k: v for k, v in want.items() if k != soa}
    assert int(got[soa][1][0].split()[2]) > SERIAL + 1  # above the serial the removal left
