"""Scenario ``certs-dns-lost`` in a living lab (cert-manager runs) with the dns-certs lab's bind9.

The lab seeds cert-manager's issuers, their Secrets and certificates, and zone ``ml.example.com`` (TSIG for
updates and transfers). After a dns-certs backup the drill deletes every Secret an Issuer or ClusterIssuer
names and removes four names' records from the zone by RFC 2136 (the zone's serial goes up, as a bad sync
leaves it); restore-plans/dns-certs-restore.yaml puts both back, cert-manager re-issues nothing, and the names
resolve again at the lab's bind9 (dnspython).
"""

from __future__ import annotations

import base64
import datetime as dt
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest
from drtool_lab.components.bind9 import Bind9Server
from drtool_lab.lab import Lab
from drtool_lab.plugins.dns_certs import SERIAL, ZONE, DnsCertsLab
from drtool_plugins.dns_certs import tsig
from kubernetes import client, config

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.catalog.scenarios import ScenarioLog
from drtool.drills import matrix
from drtool.drills.certs_dns_lost import CertsDnsLost
from drtool.drills.run import run_drill
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.repository import Repository
from tests.fixtures.core import PASSPHRASE

PLAN = Path(__file__).resolve().parents[2] / "restore-plans" / "dns-certs-restore.yaml"
REMOVED = {  # name -> (type, the answer the backup holds)
    "asr": ("A", "203.0.113.10"),
    "www": ("AAAA", "2001:db8::7"),
    "dash": ("A", "203.0.113.20"),
    "gw": ("CNAME", "asr-gw.lb.ml.example.com."),
}
ISSUER_SECRETS = {
    "cert-manager/lab-root-ca",
    "cert-manager/letsencrypt-account-key",
    "cert-manager/rfc2136-tsig",
    "ml-serving/team-ca-keypair",
}


def quiet_requests(kubeconfig: str, quiet_s: float = 3.0, timeout: float = 120.0) -> None:
    """Wait until cert-manager has made no CertificateRequest for ``quiet_s``: what it does about the freshly
    seeded Certificates belongs before the backup (the restore's check counts requests made since the backup,
    to whole seconds; a backup within a second of the seed counted cert-manager's first ones)."""
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = api.list_cluster_custom_object("cert-manager.io", "v1", "certificaterequests")["items"]
        made = [dt.datetime.fromisoformat(i["metadata"]["creationTimestamp"].replace("Z", "+00:00")) for i in items]
        if not made or (dt.datetime.now(dt.UTC) - max(made)).total_seconds() >= quiet_s:
            return
        time.sleep(0.5)
    raise AssertionError(f"cert-manager still making CertificateRequests after {timeout:.0f}s")


def answer(bind: Bind9Server, name: str, rdtype: str) -> list[str]:
    query = dns.message.make_query(f"{name}.{ZONE}.", rdtype)
    response = dns.query.tcp(query, "127.0.0.1", port=bind.port, timeout=10)
    if response.rcode() != dns.rcode.NOERROR:
        return []
    return sorted(rdata.to_text() for rrset in response.answer for rdata in rrset if rrset.rdtype.name == rdtype)


def serial(bind: Bind9Server) -> int:
    response = dns.query.tcp(dns.message.make_query(f"{ZONE}.", "SOA"), "127.0.0.1", port=bind.port, timeout=10)
    return int(response.answer[0][0].serial)


def test_issuer_secrets_and_zone_records_lost_come_back_with_no_certificate_reissued(
    drill_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    support = DnsCertsLab()
    source = support.seed(drill_lab)
    target = support.target(drill_lab)
    bind = drill_lab.first(Bind9Server.kind)
    assert isinstance(bind, Bind9Server)
    quiet_requests(target["kubeconfig"])
    monkeypatch.setenv("DRTOOL_FILE_FOLDERS", str(bind.path))  # the plan names the TSIG file: the operator allows it
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    manifest = run_backup(repo, [get_plugin("dns-certs")], {"dns-certs": source})
    assert manifest.status == "complete"
    values = {
        "TARGET_KUBECONFIG": target["kubeconfig"],
        "DNS_SERVER": target["dns_server"],
        "DNS_TSIG_FILE": target["tsig_key_file"],
    }
    loaded = check_file(PLAN, load_plugins(), values)
    catalog = Catalog(str(tmp_path / "catalog.db"))
    core = client.CoreV1Api(config.new_client_from_config(config_file=target["kubeconfig"]))
    before = {ref: core.read_namespaced_secret(*reversed(ref.split("/"))).data for ref in ISSUER_SECRETS}
    key = tsig.load(target["tsig_key_file"])
    assert key is not None
    injector = CertsDnsLost(ZONE, sorted(REMOVED), "127.0.0.1", bind.port, tsig=key.kwargs())

    row = run_drill(injector, {"kubeconfig": target["kubeconfig"]}, loaded, repo, manifest, catalog)

    print(f"figures: RPO {row.rpo_s}s; time to service {row.time_to_service_s}s")  # for docs/drills.md
    assert row.ok, (row.error, row.checks)
    assert set(injector.secrets) == ISSUER_SECRETS
    checks = {c["name"]: c for c in row.to_dict()["checks"]}
    kept = next(c for name, c in checks.items() if name.startswith("certificates-kept"))
    assert kept["ok"], kept
    # the issuers' own keys are back (cert-manager's new ACME account key, if it made one, replaced)
    after = {ref: core.read_namespaced_secret(*reversed(ref.split("/"))).data for ref in ISSUER_SECRETS}
    assert after == before
    assert base64.b64decode(after["cert-manager/lab-root-ca"]["tls.key"])
    # the names resolve again at the lab's bind9, under a serial above the one the removal left
    for name, (rdtype, value) in REMOVED.items():
        assert value in answer(bind, name, rdtype), name
    assert serial(bind) > SERIAL + 1
    assert row.injected_at < row.detected_at < row.recovered_at < row.in_service_at
    assert row.rpo_s is not None and row.rpo_s > 0 and row.rpo_steps is None
    assert row.time_to_service_s is not None and 0 < row.time_to_service_s < 900
    rows = {r["scenario"]: r for r in matrix.rows(ScenarioLog(catalog).all(), RunLog(catalog).drills())}
    assert rows["certs-dns-lost"]["last"]["ok"] and rows["certs-dns-lost"]["runnable"]
