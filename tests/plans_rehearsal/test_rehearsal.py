"""Rehearsals against the lab: a private source lab is seeded through the plugins' LabSupport, backed up, then
stopped while shipped plans are restored into fresh labs; restored systems are read back through their APIs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from drtool_lab.lab import Lab
from drtool_lab.targets import LabSource, lab_plugins, seed_sources

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.errors import UsageError
from drtool.independence.domain import FailureDomain
from drtool.plans.loader import load_plan
from drtool.rehearsal import netns
from drtool.rehearsal.agreement import bug_pairs
from drtool.rehearsal.guard import NetworkGuard, Refusal
from drtool.rehearsal.isolation import isolate
from drtool.rehearsal.rehearse import RehearsalOptions, rehearse
from drtool.repo.repository import Repository
from drtool.servers.process import alive
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error, count_manifest_reads
from tests.fixtures.kube import KubeLab

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"
BACKED_UP = ("etcd", "kubernetes", "kueue")


PLATFORM_CHECKS = {"first-workload-admitted", "services-serving", "certificates-kept", "owners-resolved"}


@pytest.fixture(autouse=True)
def quick_platform_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped plans' platform checks watch for a minute in production; a few seconds show the same here."""
    monkeypatch.setenv("DRTOOL_VAR_CHECK_WINDOW", "5s")
    monkeypatch.setenv("DRTOOL_VAR_CHECK_TIMEOUT", "2m")


class Source:
    def __init__(self, lab: Lab, repo: Repository, backup_id: str, sources: dict[str, dict[str, object]]) -> None:
        self.lab, self.repo, self.backup_id, self.sources = lab, repo, backup_id, sources


@pytest.fixture(scope="module")
def source(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A lab seeded through LabSupport and backed up; rehearsals stop it and start it again."""
    lab = Lab("rehearsal-src", lab_root)
    plugins = lab_plugins(BACKED_UP)
    try:
        sources = seed_sources(lab, plugins)
        repo = Repository.init(LocalBackend(tmp_path_factory.mktemp("rehearsal") / "store"), passphrase=PASSPHRASE)
        manifest = run_backup(repo, plugins, sources)
        assert manifest.status == "complete"
        yield Source(lab, repo, manifest.id, sources)
    finally:
        Lab.load(lab.name, lab_root).down()  # the CLI test restarted it from another process: read its state


def pids_under(root: Path) -> list[int]:
    states = [json.loads(p.read_text()) for p in root.glob("**/lab.json")]
    pids = [c.get("pid") for s in states for c in s.get("components", {}).values()]
    markers = [json.loads(p.read_text()) for p in root.glob("**/*.drtool-restore.json")]
    return [p for p in pids + [m.get("server", {}).get("pid") for m in markers] if p]


def processes_mentioning(path: Path) -> list[int]:
    """Running processes whose command line names ``path`` (lab servers keep their data under their lab)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_guard_refuses_and_records_connections_into_the_failure_domain() -> None:
    inside, outside = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    inside_port, outside_port = inside.getsockname()[1], outside.getsockname()[1]
    domain = {inside_port: "lab source etcd", None: "a name under the cluster DNS domain"}

    def is_inside(host: str, port: int | None) -> str | None:
        if host.endswith(".svc.cluster.local"):
            return domain[None]
        return domain.get(port) if host == "127.0.0.1" else None

    guard = NetworkGuard(is_inside)
    with guard:
        guard.step_started("restore-etcd")
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{inside_port}/health", timeout=5)
        with pytest.raises(OSError, match="rehearsal network guard"):
            socket.getaddrinfo("vault.vault.svc.cluster.local", 8200)
        socket.create_connection(("127.0.0.1", outside_port), timeout=5).close()  # the target: allowed
        refused = guard.step_finished("restore-etcd")
    socket.create_connection(("127.0.0.1", inside_port), timeout=5).close()  # no guard active: allowed again
    assert [r["address"] for r in refused] == [f"127.0.0.1:{inside_port}", "vault.vault.svc.cluster.local:8200"]
    assert all(r["steps"] == ["restore-etcd"] for r in refused) and refused[0]["reason"] == "lab source etcd"
    inside.close()
    outside.close()


DOMAIN = FailureDomain({"service_cidrs": ["10.96.0.0/16"], "cluster_dns_suffixes": ["cluster.local"]})


def test_guard_refuses_datagrams_mapped_addresses_and_lookups_into_the_domain() -> None:
    """The in-process guard's former bypasses: UDP sendto/sendmsg, ``::ffff:a.b.c.d``, gethostbyname."""
    guard = NetworkGuard(DOMAIN.is_inside)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    with guard:
        with pytest.raises(ConnectionRefusedError, match="rehearsal network guard"):
            udp.sendto(b"query", ("10.96.0.10", 53))
        with pytest.raises(ConnectionRefusedError):
            udp.sendmsg([b"query"], [], 0, ("10.96.0.10", 53))
        with pytest.raises(ConnectionRefusedError):
            udp6.sendto(b"query", ("::ffff:10.96.0.10", 53))
        with pytest.raises(ConnectionRefusedError, match=r"10\.96\.0\.7:80: inside network"):
            tcp6.connect(("::ffff:10.96.0.7", 80))
        with pytest.raises(ConnectionRefusedError):
            socket.gethostbyname("vault.vault.svc.cluster.local")
        udp.sendto(b"fine", ("127.0.0.1", 9))  # outside the domain: sent
    for s in (udp, udp6, tcp6):
        s.close()
    spelled_once = ["10.96.0.10:53"] * 3 + ["10.96.0.7:80", "vault.vault.svc.cluster.local"]  # mapped or not
    assert [r.address for r in guard.refused] == spelled_once
    assert {r.by for r in guard.refused} == {"guard"}


@pytest.mark.skipif(netns.available() is not None, reason=f"no network namespaces here: {netns.available()}")
def test_namespace_refuses_and_records_what_subprocesses_try(tmp_path: Path) -> None:
    """In netns mode a subprocess (git ls-remote, curl, a Python child, libpq) reaching into the domain is refused by
    the kernel and recorded by the witness or the resolver; an allowed endpoint is relayed; the source's port is
    held."""
    allowed, source = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    allowed_port, source_port = allowed.getsockname()[1], source.getsockname()[1]
    facts = {**DOMAIN.facts, "pod_cidrs": ["fd00:244::/64"], "lab_source_endpoints": [f"127.0.0.1:{source_port}"]}
    domain = FailureDomain(facts)
    guard = NetworkGuard(domain.is_inside)

    def child(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)

    with isolate("netns", domain, guard, [f"127.0.0.1:{allowed_port}"]) as isolation, guard:
        guard.step_started("restore")
        assert isolation.mode == "netns" and isolation.relayed == [f"127.0.0.1:{allowed_port}"]
        git = subprocess.run(["git", "ls-remote", "http://10.96.0.9:3000/x.git"], capture_output=True, timeout=30)
        curl = subprocess.run(["curl", "-sS", "-m", "5", "http://10.96.0.5:5000/"], capture_output=True, timeout=30)
        lookup = child("import socket; socket.getaddrinfo('minio.storage.svc.cluster.local', 9000)")
        libpq = child("import psycopg2; psycopg2.connect(host='10.96.5.5', port=5432, connect_timeout=5)")
        v6 = child("import socket; socket.create_connection(('fd00:244::7', 8080), timeout=5)")
        datagram = child("import socket; socket.socket(type=socket.SOCK_DGRAM).sendto(b'q', ('10.96.0.10', 53))")
        back = child(f"import socket; socket.create_connection(('127.0.0.1', {source_port}), timeout=5)")
        relayed = child(f"import socket; socket.create_connection(('127.0.0.1', {allowed_port}), timeout=5)")
        outside = child("import socket; socket.create_connection(('192.0.2.1', 443), timeout=5)")
        expected = {("10.96.0.9:3000", "namespace"), ("10.96.0.5:5000", "namespace"), ("10.96.5.5:5432", "namespace")}
        expected |= {("[fd00:244::7]:8080", "namespace"), ("10.96.0.10:53", "namespace")}
        expected |= {("minio.storage.svc.cluster.local", "dns"), (f"127.0.0.1:{source_port}", "namespace")}
        deadline = time.monotonic() + 60  # the witness reads the wire on its own thread: slow under load
        while time.monotonic() < deadline and not (
            expected <= {(r.address, r.by) for r in guard.refused} and "tcp 192.0.2.1:443" in isolation.blocked
        ):
            time.sleep(0.05)
        refused = guard.step_finished("restore")
    assert git.returncode != 0 and curl.returncode != 0 and lookup.returncode != 0 and back.returncode != 0
    assert libpq.returncode != 0 and "psycopg2" in libpq.stderr  # libpq opens its socket in C: no audit hook sees it
    assert relayed.returncode == 0, relayed.stderr
    assert outside.returncode != 0 and "tcp 192.0.2.1:443" in isolation.blocked
    caught = {(r["address"], r["by"]) for r in refused}
    assert v6.returncode != 0 and datagram.returncode == 0  # a datagram leaves; the witness sees it go nowhere
    assert expected <= caught
    assert all(r["steps"] == ["restore"] for r in refused)
    assert isolation.namespace not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    allowed.close()
    source.close()


def test_bug_pairs_are_what_the_guard_caught_and_the_analysis_did_not_report() -> None:
    independence = {"findings": [
        {"address": "http://vault.vault.svc:8200", "status": "inside", "detail": "a name under the cluster DNS"},
        {"address": "10.96.0.20", "status": "independent", "detail": "outside every network"},
        {"address": "registry.infra.svc:5000", "status": "remediated", "detail": "image_registry_map"},
    ]}  # fmt: skip
    refused = [Refusal(a, "inside", ("s",), 0.0, by) for a, by in [
        ("vault.vault.svc", "dns"), ("vault.vault.svc:8200", "guard"), ("10.96.0.20:53", "namespace"),
        ("registry.infra.svc:5000", "guard"), ("10.96.7.7:443", "namespace"),
    ]]  # fmt: skip
    pairs = {p["address"]: p["analysis"] for p in bug_pairs(refused, independence)}
    assert set(pairs) == {"10.96.0.20:53", "registry.infra.svc:5000", "10.96.7.7:443"}
    assert pairs["10.96.7.7:443"] == "not found by the analysis" and pairs["10.96.0.20:53"].startswith("independent")


def test_full_cluster_rebuild_into_a_fresh_lab_with_the_source_stopped(source: Source, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "catalog.db"))
    stopped = LabSource(source.lab)
    options = RehearsalOptions(source=stopped, keep=True, out_dir=tmp_path / "reports", labs_root=tmp_path)
    result = rehearse(load_plan(PLANS / "full-cluster-rebuild.yaml"), source.repo, options, catalog=catalog)
    target = Lab.load(next(n for n in Lab.names(tmp_path) if n.startswith("rehearsal-")), tmp_path)
    try:
        run = result.report["run"]
        steps = {s["id"]: s for s in run["steps"]}
        assert result.restored, (steps, result.report["checks"])
        assert steps["cluster-objects"]["status"] == steps["kueue-quotas"]["status"] == "ok"
        assert steps["secrets-store"]["status"] == "skipped"
        assert steps["secrets-store"]["summary"] == "skipped: plugin not in backup"
        assert steps["kueue-quotas"]["started_s"] >= steps["cluster-objects"]["finished_s"]
        plan_checks = {c["name"] for c in result.report["checks"] if c["step"] == "plan"}
        assert plan_checks == {"team-namespace", "gpu-quota", *PLATFORM_CHECKS}
        assert run["rto"]["met"] is True and 0 < run["rto"]["measured_s"] < 3600
        rto = run["rto"]  # the restore's steps end first; the platform serves once every check is green
        assert rto["restored_s"] <= rto["first_workload_s"] <= rto["service_s"] == rto["measured_s"]
        assert rto["service_s"] <= rto["confirmed_s"]
        assert set(run["rpo"]["per_plugin"]) == {"kubernetes", "kueue"} and run["rpo"]["met"] is True
        # the lab's upstream Velero sample keeps its backups in an in-cluster MinIO: no plugin names it, the
        # reference finder does (the BackupStorageLocation's spec.config.s3Url), so the platform is not independent
        independence = result.report["independence"]
        inside = [f for f in independence["findings"] if f["status"] == "inside"]
        assert independence["verdict"] == "fail" and not result.ok
        assert [(f["address"], f["found_by"]) for f in inside] == [("http://minio.velero.svc:9000", ["finder"])]
        assert "backupstoragelocations.velero.io velero/default spec.config.s3Url" in inside[0]["evidence"]
        assert run["isolation"]["mode"] == "in-process"  # keep: the target must stay reachable from here
        assert "subprocesses unguarded" in run["isolation"]["covers"]
        assert run["bug_pairs"] == []  # both halves agree: nothing refused that the analysis did not report
        assert {"json", "md", "html"} <= set(result.paths) and result.paths["html"].stat().st_size > 1000
        # the restored cluster, read back with the official client from the target lab's own kubeconfig
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(target["kube-apiserver"].admin_kubeconfig))  # type: ignore[attr-defined]
        namespaces = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
        assert {"team-nlp", "team-vision", "research"} <= namespaces
        secret = client.CoreV1Api(api).list_namespaced_secret("team-nlp").items
        assert secret, "Secrets restored"
        drills = RunLog(catalog).drills()
        assert [(d.plan_name, d.ok, d.independence) for d in drills] == [("full-cluster-rebuild", True, "fail")]
    finally:
        from drtool.rehearsal.target import stop_restored_servers

        stop_restored_servers(target.root)
        target.down()
    assert source.lab["kube-apiserver"].healthy()  # started again after the rehearsal


@pytest.mark.parametrize("plan", ["control-plane-from-etcd.yaml", "gpu-pool-move.yaml"])
def test_shipped_plans_rehearse_into_a_fresh_lab(source: Source, tmp_path: Path, plan: str) -> None:
    """Each into a lab of its own, torn down afterwards (kueue-quotas-only goes into fresh labs below, from the
    command line in both isolation modes with a PostgreSQL catalog; full-cluster-rebuild above).
    training-resume is not rehearsed from this source: it backs up no checkpoints or models, so the plan's
    rehearsal here restored the cluster objects and quotas full-cluster-rebuild restores (37 CPU-s for a living
    lab); its checks pass on a restored living cluster with its checkpoints in
    tests/plans_rehearsal/test_living_restore.py, its resume in test_training_rehearsal.py."""
    options = RehearsalOptions(out_dir=tmp_path / "reports", labs_root=tmp_path)
    result = rehearse(load_plan(PLANS / plan), source.repo, options)
    steps = {s["id"]: s for s in result.report["run"]["steps"]}
    assert result.restored, (steps, [c for c in result.report["checks"] if not c["ok"]])
    isolation = result.report["run"]["isolation"]
    assert isolation["mode"] == ("netns" if netns.available() is None else "in-process"), isolation
    assert result.report["run"]["bug_pairs"] == [] and not isolation["blocked"]
    assert any(s["status"] == "ok" for s in steps.values())
    gated = [s for s in steps.values() if s["approval"]]  # a rehearsal approves by itself, and says so
    assert [s["id"] for s in gated] == (["etcd-snapshot"] if plan == "control-plane-from-etcd.yaml" else [])
    assert all(s["approval"]["how"] == "automatic (rehearsal)" and s["approval"]["approved"] for s in gated)
    assert ("approved automatically" in result.paths["md"].read_text()) is bool(gated)
    assert not Lab.names(tmp_path) and not processes_mentioning(tmp_path)  # torn down, servers stopped


def test_rehearsal_into_an_existing_cluster_by_kubeconfig(
    source: Source, kube_target: KubeLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The existing cluster is a bare API server: the quotas go in and read back, but no Kueue runs there to
    admit work, so the plan's platform check fails, saying so, and the platform is not in service."""
    monkeypatch.setenv("DRTOOL_VAR_CHECK_TIMEOUT", "3s")
    options = RehearsalOptions(target=kube_target.kubeconfig, out_dir=tmp_path / "reports", labs_root=tmp_path)
    result = rehearse(load_plan(PLANS / "kueue-quotas-only.yaml"), source.repo, options)
    assert [s["status"] for s in result.report["run"]["steps"]] == ["ok"]
    assert result.report["run"]["target"] == str(Path(kube_target.kubeconfig).resolve())
    admits = next(c for c in result.report["checks"] if c["name"] == "queue-admits")
    assert not admits["ok"] and "Kueue made no Workload" in admits["detail"] and not result.restored
    assert result.report["run"]["rto"]["service_s"] is None
    flavors = kube_target.list_objects({"ResourceFlavor": "kueue.x-k8s.io/v1beta2"})["ResourceFlavor"]
    assert ("", "a100") in flavors
    assert not Lab.names(tmp_path)  # no lab was made
    missing = RehearsalOptions(target=str(tmp_path / "nope.kubeconfig"), out_dir=tmp_path, labs_root=tmp_path)
    with pytest.raises(UsageError, match="no such kubeconfig"):
        rehearse(load_plan(PLANS / "kueue-quotas-only.yaml"), source.repo, missing)


def test_a_rehearsal_reads_each_manifest_once(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backup is resolved once and passed by value to the executor, every step's restore and the
    independence analysis: its manifest is read (and decrypted) from the store once, whatever the steps."""
    plan = tmp_path / "two-steps.yaml"
    plan.write_text(
        "name: two-steps\nsteps:\n  - id: etcd-member\n    uses: etcd\n"
        "  - id: secrets\n    uses: vault\n    optional: true\n"
    )
    reads = count_manifest_reads(source.repo, monkeypatch)
    options = RehearsalOptions(out_dir=tmp_path / "reports", labs_root=tmp_path)
    result = rehearse(load_plan(plan), source.repo, options)
    steps = {s["id"]: s["status"] for s in result.report["run"]["steps"]}
    assert result.restored and steps == {"etcd-member": "ok", "secrets": "skipped"}, result.report["run"]["steps"]
    assert reads == {f"manifests/{source.backup_id}": 1}


def test_the_guard_catches_a_step_that_reaches_back_into_the_source(source: Source, tmp_path: Path) -> None:
    """An etcd step asked to compare with the (failed) source: its verify connects there, and is refused. The
    backup's own failure domain names the source etcd (the etcd plugin records its endpoints), so the guard
    refuses it with the source lab still running: no source stop and restart is needed to prove it."""
    plan = tmp_path / "compare.yaml"
    endpoints = source.sources["etcd"]["endpoints"]
    plan.write_text(
        "name: compare-with-source\nsteps:\n  - id: etcd-member\n    uses: etcd\n"
        f"    target: {{compare_with: {{endpoints: '{endpoints}'}}}}\n"
    )
    catalog = Catalog(str(tmp_path / "catalog.db"))
    options = RehearsalOptions(out_dir=tmp_path / "reports", labs_root=tmp_path)
    result = rehearse(load_plan(plan), source.repo, options, catalog=catalog)
    step = result.report["run"]["steps"][0]
    assert not result.ok and step["status"] == "refused"
    port = str(endpoints).rsplit(":", 1)[1]
    assert {r["address"] for r in step["refused_connections"]} == {f"127.0.0.1:{port}"}
    assert step["refused_connections"][0]["steps"] == ["etcd-member"]
    assert "inside the failure domain" in step["error"]
    assert result.report["run"]["bug_pairs"] == []  # the analysis names the source etcd the verify compares with
    drill = RunLog(catalog).drills()[0]
    assert not drill.ok and drill.refused_connections >= 1


@pytest.mark.skipif(netns.available() is not None, reason=f"no network namespaces here: {netns.available()}")
def test_cli_rehearse_isolation_drills_and_runbook(cli: Cli, source: Source, postgres_url: str, tmp_path: Path) -> None:
    """From the command line, once per isolation mode, each into a fresh lab. netns: the restore's processes live
    where the source does not exist, and it still works. in-process (the source lab stopped meanwhile, a failure
    far in the future so the RPO objective is missed: exit 7) says what it does not cover. Every server either
    started is stopped afterwards; `drills` and `runbook` read what the rehearsals recorded. The catalog is a
    PostgreSQL database: libpq opens its own sockets, so in the namespace it is reachable only through a relay,
    which the netns report names (this run replaces a rehearsal of its own for it, about 15 CPU-s)."""
    from sqlalchemy.engine import make_url

    store = ["--store", source.repo.backend.url, "--catalog", postgres_url]
    url = make_url(postgres_url)
    cli.env["DRTOOL_LAB_DIR"] = str(source.lab.root.parent)
    seeded = cli("lab", "seed", source.lab.name, "-p", "kubernetes", "-p", "kueue", check=True).stdout
    assert "seeded kubernetes in" in seeded and "seeded kueue in" in seeded  # once per lab: a no-op here
    assert_clean_error(cli("lab", "seed", source.lab.name, "-p", "files"), 2, "have no lab support")
    plan = ["--plan", str(PLANS / "kueue-quotas-only.yaml")]
    labs = tmp_path / "labs"  # the netns rehearsal's target; the in-process one's is beside the source lab
    runs = {
        "netns": ([], {"DRTOOL_LAB_DIR": str(labs)}, 0, "every process the restore starts"),
        "in-process": (["--source-lab", source.lab.name, "--failure-time", "2099-01-01T00:00:00Z"], {}, 7,
                       "subprocesses unguarded"),
    }  # fmt: skip
    for mode, (extra, env, code, covers) in runs.items():
        out = tmp_path / mode
        proc = cli(*store, "rehearse", "--isolation", mode, *plan, *extra, "--out", str(out), env=env)
        assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr
        assert f"isolation: {mode}" in proc.stdout and covers in proc.stdout.replace("\n", " ")
        report = json.loads(next(out.glob("*.json")).read_text())
        isolation = report["run"]["isolation"]
        assert isolation["mode"] == mode and report["run"]["bug_pairs"] == [] and not isolation["blocked"]
        assert isolation.get("relayed", []) == ([f"{url.host}:{url.port}"] if mode == "netns" else []), isolation
        assert f"**{mode}**" in next(out.glob("*.md")).read_text()
        assert "report (html)" in proc.stdout
    assert "RPO" in proc.stdout and "MISSED" in proc.stdout  # the in-process one: decades of state lost
    assert not any(alive(p) for p in pids_under(labs)) and not processes_mentioning(labs)
    beside = [n for n in Lab.names(source.lab.root.parent) if n.startswith("rehearsal-") and n != source.lab.name]
    assert not beside  # the in-process rehearsal's target lab (beside the source lab): torn down
    assert Lab.load(source.lab.name, source.lab.root.parent)["kube-apiserver"].healthy()  # started again
    drills = cli(*store, "drills", check=True).stdout
    assert "kueue-quotas-only" in drills and "missed" in drills
    recorded = RunLog(Catalog(postgres_url)).drills()  # both rehearsals, the netns one's through the relay
    assert [d.plan_name for d in recorded] == ["kueue-quotas-only"] * 2
    runbook = cli(*store, "runbook", "--plan", str(PLANS / "full-cluster-rebuild.yaml"), check=True).stdout
    assert "# Runbook: full-cluster-rebuild" in runbook and source.backup_id in runbook
    assert "**Needs approval**" in runbook and "When to escalate" in runbook and "passphrase" in runbook
    assert "If it fails, these wait for it: cluster-objects, helm-releases, kueue-quotas" in runbook
    assert PASSPHRASE not in runbook
    bad = cli(*store, "rehearse", "--isolation", "netns", "--keep", *plan)
    assert_clean_error(bad, 2, "--keep needs the target reachable afterwards")
