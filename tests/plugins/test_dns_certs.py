"""The dns-certs plugin against real servers: a lab kube-apiserver (cert-manager CRDs, no cert-manager
controller) and real bind9 servers (TSIG-protected AXFR and RFC 2136 updates).

Reads that check a restore go through independent clients — the official ``kubernetes`` client and plain
dnspython queries — not through the plugin's own code.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rdatatype
import pytest
import yaml
from cryptography import x509
from drtool_lab.components.bind9 import Bind9Server
from drtool_lab.plugins.dns_certs import SERIAL, VALUES, ZONE
from drtool_plugins.dns_certs import DnsCertsPlugin, certs, externaldns, zones
from kubernetes import client as k8s

from drtool.errors import UsageError, WrongKey
from drtool.plans.validate import check_file
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import restore_dependencies, run_restore
from drtool.standby.steps import dns_cut_over, run_plan_steps
from tests.fixtures.bind9 import DnsLab
from tests.fixtures.core import Cli, assert_clean_error

plugin = DnsCertsPlugin()
NS = VALUES["ns"]


def backup(repo: Repository, source: dict[str, Any]) -> Manifest:
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, source)
        assert outcome.status == "ok", outcome.error
        return session.commit()


def secret_bytes(lab: DnsLab, ns: str, name: str) -> dict[str, bytes]:
    with lab.api_client() as api:
        data = k8s.CoreV1Api(api).read_namespaced_secret(name, ns).data or {}
    return {k: base64.b64decode(v) for k, v in data.items()}


def custom(lab: DnsLab, plural: str, ns: str | None = None) -> list[dict[str, Any]]:
    with lab.api_client() as api:
        co = k8s.CustomObjectsApi(api)
        if ns:
            return co.list_namespaced_custom_object("cert-manager.io", "v1", ns, plural)["items"]
        return co.list_cluster_custom_object("cert-manager.io", "v1", plural)["items"]


def axfr(bind: Bind9Server, key_file: str | Path) -> dict[tuple[str, str], tuple[int, tuple[str, ...]]]:
    """The zone as bind9 serves it, through dnspython directly (not the plugin's transfer code)."""
    from drtool_plugins.dns_certs import tsig

    key = tsig.load(str(key_file))
    assert key is not None
    out: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
    msgs = dns.query.xfr("127.0.0.1", ZONE, port=bind.port, relativize=False, lifetime=10, **key.kwargs())
    for msg in msgs:
        for rrset in msg.answer:
            name, rdtype = rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype)
            out[(name, rdtype)] = (rrset.ttl, tuple(sorted(r.to_text() for r in rrset)))
    return out


def install_cert_manager(lab: DnsLab) -> None:
    """cert-manager's CRDs, as installing cert-manager in the new cluster (before the restore) leaves them:
    so that a CertificateRequest could be created, and its absence means something."""
    from drtool_lab.kube_seed import KubeClient, install_crds

    install_crds(KubeClient(lab.lab["kube-apiserver"].access()), ["cert-manager"])  # type: ignore[attr-defined]


def soa_serial(bind: Bind9Server) -> int:
    answer = dns.query.udp(dns.message.make_query(f"{ZONE}.", "SOA"), "127.0.0.1", port=bind.port, timeout=5)
    return answer.answer[0][0].serial


# --- round trip into a fresh cluster and bind9 ---------------------------------------------------------


def test_round_trip_keeps_certificates_without_reissue(
    repo: Repository, dns_source: DnsLab, dns_target: DnsLab
) -> None:
    inventory = plugin.discover(dns_source.settings)
    assert inventory.counts["certificates.cert-manager.io"] == 2 and inventory.details["zones"] == {f"{ZONE}.": SERIAL}
    manifest = backup(repo, dns_source.settings)
    meta = manifest.plugins["dns-certs"].meta
    names = {a.name for a in manifest.artifacts}
    assert "resources/cert-manager.io/certificaterequests.ndjson" not in names  # runtime state, left out
    assert meta["not_backed_up"].keys() >= {"certificaterequests.cert-manager.io"}
    assert next(a for a in manifest.artifacts if a.name == "resources/core/secrets.ndjson").sensitive
    assert meta["objects"]["secrets"] == 6, "the named Secrets only (not the unrelated one)"
    assert meta["zones"][f"{ZONE}."]["serial"] == SERIAL
    assert meta["externaldns"][0]["txt_owner_id"] == VALUES["owner_id"]
    assert meta["kube_dns_ip"] == VALUES["kube_dns_ip"]

    install_cert_manager(dns_target)
    out = run_restore(repo, manifest, plugin, dns_target.settings, options={"externaldns": "hold", "rto": "4h"})
    assert out.verified, [c for c in out.checks if not c.ok]
    assert out.result.changed
    # Secrets byte for byte, with cert-manager's annotations; no CertificateRequest anywhere
    for cert in ("asr-tls", "expiring-tls"):
        assert secret_bytes(dns_target, NS, cert) == secret_bytes(dns_source, NS, cert)
    assert custom(dns_target, "certificaterequests") == []
    secret = k8s.CoreV1Api(dns_target.api_client()).read_namespaced_secret("asr-tls", NS)
    assert secret.metadata.annotations[certs.CERT_NAME] == "asr-tls"
    assert secret.metadata.annotations[certs.ISSUER_NAME] == "lab-ca"
    restored = {c["metadata"]["name"]: c for c in custom(dns_target, "certificates", NS)}
    assert restored["asr-tls"]["status"]["revision"] == 1
    assert restored["asr-tls"]["status"]["conditions"][0]["status"] == "True"
    raw = {"metadata": {"annotations": secret.metadata.annotations, "name": "asr-tls", "namespace": NS},
           "data": {k: v for k, v in secret.data.items()}}  # fmt: skip
    assert certs.reissue_reasons(restored["asr-tls"], raw, dt.datetime.now(dt.UTC)) == []
    # the checks that say so, by name
    by_name = {c.name: c for c in out.checks}
    assert by_name["dns-certs: cert-manager would not re-issue"].ok
    assert by_name["dns-certs: no certificaterequests.cert-manager.io"].ok
    assert by_name[f"dns-certs: kube-dns ClusterIP {VALUES['kube_dns_ip']}"].ok
    # expiry: the 10-day certificate is warned about with a 14-day margin, the 90-day one is not
    assert out.result.details["expiring"] == [f"{NS}/expiring-tls"]
    assert "WARNING 1 certificate(s)" in out.result.summary
    # the zone: serial and every record set, read back from the target bind9
    assert soa_serial(dns_target.bind) == SERIAL
    assert axfr(dns_target.bind, dns_target.settings["tsig_key_file"]) == axfr(
        dns_source.bind, dns_source.settings["tsig_key_file"]
    )
    # kube-dns kept its ClusterIP; ExternalDNS is held at upsert-only with its owner id
    with dns_target.api_client() as api:
        assert k8s.CoreV1Api(api).read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip == "10.96.0.10"
        dep = k8s.AppsV1Api(api).read_namespaced_deployment("external-dns", "external-dns")
    assert "--policy=upsert-only" in dep.spec.template.spec.containers[0].args
    assert f"--txt-owner-id={VALUES['owner_id']}" in dep.spec.template.spec.containers[0].args

    again = run_restore(repo, manifest, plugin, dns_target.settings, options={"externaldns": "hold", "rto": "4h"})
    assert again.verified and not again.result.changed, again.result.summary

    released = run_restore(repo, manifest, plugin, dns_target.settings, options={"externaldns": "release"})
    assert released.verified and released.result.changed
    with dns_target.api_client() as api:
        dep = k8s.AppsV1Api(api).read_namespaced_deployment("external-dns", "external-dns")
    args = dep.spec.template.spec.containers[0].args
    assert "--policy=sync" in args and "--policy=upsert-only" not in args
    assert externaldns.HELD not in (dep.metadata.annotations or {})

    # the DNS cut-over list, in the meta and as reference dependencies for the independence report
    cut = {c["record"] for c in meta["cutover"]}
    assert cut == {
        f"asr.{ZONE}. A 203.0.113.10",
        f"dash.{ZONE}. A 203.0.113.20",
        f"gw.{ZONE}. CNAME asr-gw.lb.{ZONE}.",
        f"api.{ZONE}. CNAME asr-gw.lb.{ZONE}",
        f"grpc.{ZONE}. A 203.0.113.10",
    }, "www, mail and docs point elsewhere: not listed"
    refs = [d for d in restore_dependencies(repo, plugin, manifest, dns_target.settings) if d.kind == "reference"]
    assert {d.address for d in refs} >= {"203.0.113.10", "203.0.113.20", f"asr-gw.lb.{ZONE}"}
    assert meta["failure_domain"]["loadbalancer_addresses"] == ["203.0.113.10", f"asr-gw.lb.{ZONE}"]


# --- zones alone: wrong key, zone file, serial ahead --------------------------------------------------


def test_wrong_tsig_key_is_a_clear_error(repo: Repository, dns_source: DnsLab, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.key"
    wrong.write_text('key "drtool-lab" {\n\talgorithm hmac-sha256;\n\tsecret "' + "A" * 43 + '=";\n};\n')
    source = {"kubernetes": False, "dns_server": dns_source.settings["dns_server"], "zones": ZONE}
    with BackupSession(repo) as session:
        outcome = session.run_plugin(plugin, {**source, "tsig_key_file": str(wrong)})
        assert outcome.status == "failed"
        assert "rejected the TSIG signature" in (outcome.error or "")
        none = session.run_plugin(plugin, source)  # no key at all: the server refuses the transfer
        assert none.status == "failed" and "refused" in (none.error or "")
    with pytest.raises(WrongKey):
        zones.read(zones.DnsServer("127.0.0.1", dns_source.bind.port, str(wrong)), f"{ZONE}.", None)


def test_zone_file_restore_is_served_by_bind9(repo: Repository, dns_source: DnsLab, bind9: Bind9Server) -> None:
    source = {**dns_source.settings, "kubernetes": False}
    manifest = backup(repo, source)
    target = {"kubernetes": False, "zone_dir": str(bind9.zone_dir)}
    out = run_restore(repo, manifest, plugin, target)
    assert out.verified and out.result.changed
    bind9.start()  # serves the restored file as its zone
    assert soa_serial(bind9) == SERIAL
    assert axfr(bind9, bind9.key_file) == axfr(dns_source.bind, dns_source.settings["tsig_key_file"])
    assert not run_restore(repo, manifest, plugin, target).result.changed


def test_cutover_repoints_records_at_the_new_load_balancers(
    repo: Repository, dns_source: DnsLab, bind9: Bind9Server
) -> None:
    """`cutover`: the restored zone's records that named the old load balancers name the new ones."""
    manifest = backup(repo, {**dns_source.settings, "kubernetes": False})
    old_ip, old_host = VALUES["lb_ip"], VALUES["lb_hostname"]
    cutover = f"{old_ip}=198.51.100.50,{old_host}=gw.new-lb.example.net"
    target = {"kubernetes": False, "zone_dir": str(bind9.zone_dir)}
    bad = {"cutover": f"{old_ip}=gw.new-lb.example.net"}  # an A record cannot hold a name
    with pytest.raises(UsageError, match="not an IPv4 address"):
        run_restore(repo, manifest, plugin, target, options=bad)
    assert not list(bind9.zone_dir.glob("*.zone")) if bind9.zone_dir.exists() else True  # nothing written
    out = run_restore(repo, manifest, plugin, target, options={"cutover": cutover})
    assert out.verified and out.result.changed
    bind9.start()
    served = axfr(bind9, bind9.key_file)
    values = {r for (_, rdtype), (_, rdatas) in served.items() if rdtype in ("A", "CNAME") for r in rdatas}
    assert old_ip not in values and f"{old_host}." not in values
    assert "198.51.100.50" in values and "gw.new-lb.example.net." in values
    assert len(served) == len(axfr(dns_source.bind, dns_source.settings["tsig_key_file"]))


def test_a_failover_plan_step_cuts_dns_over_to_the_standby(
    repo: Repository, dns_source: DnsLab, bind9: Bind9Server, tmp_path: Path
) -> None:
    """docs/standby.md, "Failover": a `dns-certs` step of the failover plan, run by the failover
    (drtool/standby/steps.py) from the set's newest backup, re-points the old load balancers' records at the
    standby's, and the failover then does not list DNS as left."""
    with BackupSession(repo, backup_set="prod") as session:
        assert session.run_plugin(plugin, {**dns_source.settings, "kubernetes": False}).status == "ok"
        manifest = session.commit()
    step = {"id": "dns", "uses": "dns-certs", "with": {"cutover": f"{VALUES['lb_ip']}=198.51.100.50"}}
    target = {"dns-certs": {"kubernetes": False, "zone_dir": str(bind9.zone_dir)}}
    (tmp_path / "plan.json").write_text(json.dumps({"name": "failover", "steps": [step], "target": target}))
    plan = check_file(tmp_path / "plan.json", load_plugins()).require()
    done = run_plan_steps(repo, plan, "prod", ["kubernetes"], {}, None, time.monotonic)
    assert [(r["ok"], r["backup"]) for r in done.results] == [(True, manifest.id)], done.results
    assert dns_cut_over(done.results)
    bind9.start()
    served = {r for (_, rdtype), (_, rdatas) in axfr(bind9, bind9.key_file).items() if rdtype == "A" for r in rdatas}
    assert VALUES["lb_ip"] not in served and "198.51.100.50" in served


def test_update_refuses_a_target_serial_ahead(repo: Repository, dns_source: DnsLab, bind9: Bind9Server) -> None:
    bind9.zone_dir.mkdir(parents=True)
    ahead = (SERIAL + 5) % 2**32
    bind9.zone_file(ZONE).write_text(
        f"$TTL 300\n@ SOA ns1 hostmaster {ahead} 3600 600 604800 300\n@ NS ns1\nns1 A 127.0.0.1\nkeep A 192.0.2.1\n"
    )
    bind9.start()
    before = axfr(bind9, bind9.key_file)
    manifest = backup(repo, {**dns_source.settings, "kubernetes": False})
    target = {"kubernetes": False, "dns_server": bind9.address, "tsig_key_file": str(bind9.key_file)}
    with pytest.raises(UsageError, match="ahead of the backup"):
        run_restore(repo, manifest, plugin, target)
    assert axfr(bind9, bind9.key_file) == before, "nothing was written"


# --- from the command line ----------------------------------------------------------------------------


def test_cli_backup_show_restore(cli: Cli, tmp_path: Path, dns_source: DnsLab, bind9: Bind9Server) -> None:
    bind9.start()
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": {"dns-certs": dns_source.settings}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    done = json.loads(cli("backup", "-p", "dns-certs", "--json", check=True).stdout)
    assert done["status"] == "complete"
    shown = json.loads(cli("show", done["id"], "--json", check=True).stdout)
    meta = shown["plugins"]["dns-certs"]["meta"]
    assert len(meta["cutover"]) == 5 and meta["zones"][f"{ZONE}."]["serial"] == SERIAL
    target = ["-t", "kubernetes=false", "-t", f"dns_server={bind9.address}", "-t", f"tsig_key_file={bind9.key_file}"]
    dry = json.loads(cli("restore", done["id"], "-p", "dns-certs", *target, "--dry-run", "--json", check=True).stdout)
    assert (dry["checks"], dry["verification"], dry["verified"]) == ([], "none", False)  # nothing to check
    assert soa_serial(bind9) == 1, "a dry run writes nothing"
    assert dry["details"]["zones"][f"{ZONE}."]["replace"] > 0
    restored = json.loads(cli("restore", done["id"], "-p", "dns-certs", *target, "--json", check=True).stdout)
    assert restored["verified"] and restored["changed"]
    assert soa_serial(bind9) == SERIAL
    wrong = tmp_path / "wrong.key"
    wrong.write_text('key "drtool-lab" { algorithm hmac-sha256; secret "' + "B" * 43 + '="; };\n')
    bad = ["-t", "kubernetes=false", "-t", f"dns_server={bind9.address}", "-t", f"tsig_key_file={wrong}"]
    assert_clean_error(cli("restore", done["id"], "-p", "dns-certs", *bad), 5, "TSIG")


# --- pure functions -------------------------------------------------------------------------------------


def test_secrets_are_restored_before_certificates() -> None:
    """The kubernetes plugin's restore order (which dns-certs uses) puts Secrets levels before Certificates."""
    from drtool.kube.discovery import ResourceType
    from drtool.kube.order import level_of

    secrets = ResourceType("", "v1", "secrets", "Secret", True)
    certificates = ResourceType("cert-manager.io", "v1", "certificates", "Certificate", True, crd=True)
    assert level_of(secrets) < level_of(certificates)


def test_externaldns_policy_rewrite() -> None:
    args = ["--source=service", "--policy", "sync", "--txt-owner-id=prod"]
    assert externaldns.with_policy(args, "upsert-only") == [
        "--source=service",
        "--txt-owner-id=prod",
        "--policy=upsert-only",
    ]
    dep = {"metadata": {"name": "e", "namespace": "n"},
           "spec": {"template": {"spec": {"containers": [{"name": "e", "args": args}]}}}}  # fmt: skip
    held = externaldns.hold(dep)
    assert held["metadata"]["annotations"][externaldns.HELD] == "sync"
    assert externaldns.settings(held)["policy"] == "upsert-only"
    assert externaldns.settings(dep)["txt_owner_id"] == "prod"


def test_reissue_reasons_catch_a_foreign_key(tmp_path: Path) -> None:
    from drtool.servers import pki

    ca = pki.make_ca(tmp_path, "ca")
    a = pki.issue(ca, tmp_path, "a", "a.example", sans=["a.example"], days=30)
    b = pki.issue(ca, tmp_path, "b", "b.example", sans=["b.example"], days=30)
    spec = {"dnsNames": ["a.example"], "issuerRef": {"name": "ca"}, "privateKey": {"algorithm": "ECDSA"}}
    cert = {"metadata": {"name": "a"}, "spec": spec}
    annotations = {certs.CERT_NAME: "a", certs.ISSUER_NAME: "ca", certs.ISSUER_KIND: "Issuer"}

    def secret(crt: Path, key: Path) -> dict[str, Any]:
        data = {
            "tls.crt": base64.b64encode(crt.read_bytes()).decode(),
            "tls.key": base64.b64encode(key.read_bytes()).decode(),
        }
        return {"metadata": {"name": "a", "namespace": "n", "annotations": annotations}, "data": data}

    now = dt.datetime.now(dt.UTC)
    assert certs.reissue_reasons(cert, secret(a.cert, a.key), now) == []
    assert any("PublicKeysDiffer" in r for r in certs.reissue_reasons(cert, secret(a.cert, b.key), now))
    assert any("DNS names" in r for r in certs.reissue_reasons(cert, secret(b.cert, b.key), now))
    assert any("Renewing" in r for r in certs.reissue_reasons(cert, secret(a.cert, a.key), now + dt.timedelta(days=25)))
    assert certs.reissue_reasons(cert, None, now)[0].startswith("SecretDoesNotExist")
    parsed = x509.load_pem_x509_certificate(a.cert.read_bytes())
    assert certs.renewal_time(parsed, {"renewBefore": "120h0m0s"}) == parsed.not_valid_after_utc - dt.timedelta(days=5)


def test_update_serials_step_up_to_the_backups() -> None:
    """Every UPDATE message sets the serial (else the server increments it per message and the zone ends
    ahead of the backup); the steps follow RFC 1982, across the 2**32 wrap too."""
    zone = "z."

    def zone_with(serial: int, records: int = 0) -> zones.RRsets:
        out = {(zone, "SOA"): (300, (f"ns1.z. h.z. {serial} 1 1 1 1",))}
        return out | {(f"h{i}.z.", "A"): (300, (f"10.0.{i // 256}.{i % 256}",)) for i in range(records)}

    big = zones.plan_update(zone, zone_with(1000, 1000), zone_with(1))
    assert big.messages == 3 and big.serials == [998, 999, 1000]
    assert zones.plan_update(zone, zone_with(3, 1), zone_with(2**32 - 2)).serials == [3]  # wrapped: 2**32-2 < 3
    assert zones.plan_update(zone, zone_with(7, 2), zone_with(7, 2)).empty
    with pytest.raises(UsageError, match="ahead of the backup"):
        zones.plan_update(zone, zone_with(1, 1), zone_with(5))
    with pytest.raises(UsageError, match="needs 3 messages"):
        zones.plan_update(zone, zone_with(3, 1000), zone_with(1))
