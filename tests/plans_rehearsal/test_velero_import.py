"""Velero's backups of the seeded living lab, brought into drtool and rehearsed into a fresh lab.

One source for the module: the living lab seeded as the kubernetes plugin seeds it, with Velero (built from
its module in lab/gomod/velero) running against it and storing into the lab's MinIO through the AWS plugin.
Velero backs it up once (``velero backup create --wait``); drtool backs up the same cluster once, for the
comparison of what each holds. The parser and the refusals read that real backup (a local copy of the bucket,
damaged or edited per test); the round trip imports it with the CLI from the bucket and rehearses the shipped
full-cluster-rebuild plan from it into a fresh living lab, the source stopped.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.cluster import seeded_cluster
from drtool_lab.components.minio import MinioServer
from drtool_lab.components.velero import BUCKET, PREFIX, VeleroServer
from drtool_lab.lab import Lab
from drtool_lab.targets import LabSource
from kubernetes import client, config

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.crypto.credentials import Credentials
from drtool.plans.loader import load_plan
from drtool.plugin.manager import get_plugin
from drtool.rehearsal.rehearse import RehearsalOptions, rehearse
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.velero.backup import read_backup
from drtool.velero.importer import import_backup
from drtool.velero.tarball import parse
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error
from tests.fixtures.kube import wait_for

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"
TEAMS = ("team-nlp", "team-vision", "team-speech", "research")
BACKUP = "seeded"  # velero backup create seeded --include-cluster-resources=true
DEFAULT = "seeded-default"  # velero backup create seeded-default
Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def quick_platform_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped plan's platform checks watch for a minute in production; a few seconds show the same here."""
    monkeypatch.setenv("DRTOOL_VAR_CHECK_WINDOW", "5s")


@dataclasses.dataclass
class Source:
    lab: Lab
    velero: VeleroServer
    minio: MinioServer
    backup: Obj  # the Backup object as Velero left it
    native: Manifest  # drtool's own backup of the same cluster, for the comparison
    copy: Path  # a local copy of the location: <copy>/backups/<name>/...
    seconds: dict[str, float]  # wall time of each tool's backup of the cluster (one run each, not a benchmark)

    def s3_env(self) -> dict[str, str]:
        return self.minio.env()


def settled(api: Any) -> bool:
    """The platform acted on the seed: Deployments available, each team's Job done or held by Kueue."""
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    deployments = [d for ns in TEAMS for d in apps.list_namespaced_deployment(ns).items]
    if not deployments or any((d.status.available_replicas or 0) < d.spec.replicas for d in deployments):
        return False
    jobs = [j for ns in TEAMS for j in batch.list_namespaced_job(ns).items]
    return bool(jobs) and all(j.status.succeeded or j.spec.suspend for j in jobs)


def copy_location(minio: MinioServer, name: str, into: Path) -> Path:
    """Velero's objects of backup ``name``, downloaded as a bucket copy ``drtool import velero --from`` reads."""
    s3 = minio.client()
    prefix = f"{PREFIX}/backups/{name}/"
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]:
        path = into / item["Key"].removeprefix(f"{PREFIX}/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    return into


@pytest.fixture(scope="module")
def source(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    lab = Lab("velero-src", root=lab_root)
    try:
        sources = {"kubernetes": seeded_cluster(lab)}
        lab.up(["velero"])
        velero, minio = lab["velero"], lab["minio"]
        assert isinstance(velero, VeleroServer) and isinstance(minio, MinioServer)
        server = lab["kube-apiserver"]
        api = config.new_client_from_config(config_file=str(server.admin_kubeconfig))  # type: ignore[attr-defined]
        wait_for(lambda: settled(api), "the platform acting on the seed", timeout=180)
        default = velero.backup(DEFAULT)  # as `velero backup create NAME` makes it: see the test below
        assert default["status"]["phase"] == "Completed", default["status"]
        started = time.monotonic()
        backup = velero.backup(BACKUP, "--include-cluster-resources=true")
        seconds = {"velero backup create --include-cluster-resources --wait": time.monotonic() - started}
        assert backup["status"]["phase"] == "Completed", backup["status"]
        repo = Repository.init(LocalBackend(tmp_path_factory.mktemp("native") / "store"), passphrase=PASSPHRASE)
        started = time.monotonic()
        native = run_backup(repo, [get_plugin("kubernetes")], sources)
        seconds["drtool backup -p kubernetes"] = time.monotonic() - started
        copy = copy_location(minio, BACKUP, tmp_path_factory.mktemp("velero-bucket"))
        copy_location(minio, DEFAULT, copy)
        yield Source(lab, velero, minio, backup, native, copy, seconds)
    finally:
        lab.down()


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    Repository.init(LocalBackend(path), passphrase=PASSPHRASE)
    return path


def _files(store: Path) -> dict[str, int]:
    return {str(p.relative_to(store)): p.stat().st_size for p in store.rglob("*") if p.is_file()}


def test_velero_backs_up_the_seeded_lab_and_its_tarball_reads_back(source: Source) -> None:
    folder = source.copy / "backups" / BACKUP
    tarball = parse((folder / f"{BACKUP}.tar.gz").read_bytes(), BACKUP)
    status = source.backup["status"]
    assert tarball.format_version == status["formatVersion"] == "1.1.0"
    assert tarball.objects == status["progress"]["itemsBackedUp"] > 200
    assert tarball.versioned_copies == tarball.objects  # each object again under <version>-preferredversion/
    for key in ("deployments.apps", "customresourcedefinitions.apiextensions.k8s.io", "clusterqueues.kueue.x-k8s.io"):
        assert key in tarball.resources, sorted(tarball.resources)
    checked = read_backup(str(source.copy), BACKUP)  # phase, format, item count and resource list all agree
    assert checked.provenance.location == "default" and checked.provenance.items == tarball.objects


def test_velero_s_default_backup_leaves_cluster_scoped_resources_out_and_the_import_says_so(
    source: Source, tmp_path: Path
) -> None:
    """Velero v1.18.3's plain `velero backup create`: no ClusterQueue, ResourceFlavor or ClusterIssuer; only
    namespaces and what its actions pull in (CRDs of backed-up custom resources, ClusterRoles of
    ServiceAccounts). A restore from it cannot bring the platform's quotas back, and the import says why."""
    tarball = parse((source.copy / "backups" / DEFAULT / f"{DEFAULT}.tar.gz").read_bytes(), DEFAULT)
    for key in ("clusterqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io", "clusterissuers.cert-manager.io"):
        assert key not in tarball.resources
    assert "namespaces" in tarball.resources and "customresourcedefinitions.apiextensions.k8s.io" in tarball.resources
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    imported = import_backup(repo, str(source.copy), DEFAULT)
    assert any(line.startswith("cluster-scoped resources: Velero backed up only") for line in imported.not_captured)
    full = import_backup(repo, str(source.copy), BACKUP)
    assert not any(line.startswith("cluster-scoped resources") for line in full.not_captured)


def _edit_metadata(folder: Path, **status: Any) -> None:
    path = folder / "velero-backup.json"
    backup = json.loads(path.read_text())
    backup["status"] |= status
    path.write_text(json.dumps(backup))


def _edit_tarball(folder: Path, edit: Any) -> None:
    path = folder / f"{BACKUP}.tar.gz"
    path.write_bytes(edit(path.read_bytes()))


def _damage_header(data: bytes) -> bytes:
    """The checksum of the tenth member's header changed, the gzip stream made anew (so its CRC holds)."""
    raw = bytearray(gzip.decompress(data))
    offset, members = 0, 0
    while members < 10:
        size = int(raw[offset + 124 : offset + 136].rstrip(b"\0 ") or b"0", 8)
        offset += 512 + (size + 511) // 512 * 512
        members += 1
    raw[offset + 148] ^= 0x01
    return gzip.compress(bytes(raw))


BAD = {
    "truncated": (lambda f: _edit_tarball(f, lambda d: d[: len(d) // 2]), 4, "seeded.tar.gz is truncated"),
    "flipped-byte": (lambda f: _edit_tarball(f, lambda d: d[:99] + bytes([d[99] ^ 1]) + d[100:]), 4, "seeded.tar.gz"),
    "damaged-header": (lambda f: _edit_tarball(f, _damage_header), 4, "the tar stops at byte"),
    "in-progress": (lambda f: _edit_metadata(f, phase="InProgress"), 7, "Velero backup seeded is InProgress"),
    "partially-failed": (lambda f: _edit_metadata(f, phase="PartiallyFailed", errors=2), 7, "is PartiallyFailed (2"),
    "unknown-format": (lambda f: _edit_metadata(f, formatVersion="2.0.0"), 2, "has format version '2.0.0'"),
}


def test_the_import_holds_what_velero_captured_and_says_what_it_did_not(source: Source, tmp_path: Path) -> None:
    """Per type, objects in drtool's own backup of the cluster and in the imported Velero backup of it."""
    repo = Repository.init(LocalBackend(tmp_path / "store"), passphrase=PASSPHRASE)
    started = time.monotonic()
    imported = import_backup(repo, str(source.copy), BACKUP)
    source.seconds["drtool import velero (local copy)"] = time.monotonic() - started
    mine = imported.manifest.plugins["kubernetes"].meta
    native = source.native.plugins["kubernetes"].meta
    keys = set(mine["resources"]) | set(native["resources"])
    counts = {k: (native["resources"].get(k, {}).get("count", 0), mine["resources"].get(k, {}).get("count", 0))
              for k in keys}  # fmt: skip
    differ = {k: v for k, v in sorted(counts.items()) if v[0] != v[1]}
    report = {"differ (drtool, velero)": differ, "not_captured": imported.not_captured,
              "skipped_in_import": mine["skipped_resources"], "velero_seconds": source.seconds}  # fmt: skip
    print(json.dumps(report, indent=1))
    assert mine["objects"] > 0
    # the failure domain read out of Velero's objects by the readers drtool uses on the live cluster: the same
    # facts, but the API server's address (not in a Velero backup, and no --source-server given)
    live = {k: v for k, v in source.native.failure_domain.items() if not k.startswith("kubernetes_api_")}
    assert imported.manifest.failure_domain == live
    print(json.dumps(live))
    assert set(live) > {"cluster_dns_suffixes"}
    assert all(mine["failure_domain_evidence"][key].endswith(f"(Velero backup {BACKUP})") for key in live)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_velero_backup_is_refused_in_one_line_and_nothing_is_written(
    source: Source, cli: Cli, tmp_path: Path, case: str
) -> None:
    damage, code, fragment = BAD[case]
    location = tmp_path / "location"
    shutil.copytree(source.copy, location)
    damage(location / "backups" / BACKUP)
    store = _store(tmp_path)
    before = _files(store)
    proc = cli("--store", str(store), "import", "velero", BACKUP, "--from", str(location))
    assert_clean_error(proc, code, fragment)
    assert _files(store) == before  # no manifest, no pack, no index: nothing became visible, nothing was stored


def test_velero_restores_its_own_backup_into_another_namespace(source: Source) -> None:
    """Velero's own restore of the same backup works here too (a team's namespace, mapped to a new one)."""
    restore = source.velero.restore(
        "seeded-nlp", BACKUP, "--include-namespaces=team-nlp", "--namespace-mappings=team-nlp:team-nlp-velero"
    )
    status = restore["status"]
    details = source.velero.cli("restore", "describe", "seeded-nlp", "--details").stdout
    print(f"velero restore: {status.get('phase')}, {status.get('errors', 0)} error(s)\n{details}")
    assert status["phase"] == "Completed", status  # what failed is printed above
    server = source.lab["kube-apiserver"]
    api = config.new_client_from_config(config_file=str(server.admin_kubeconfig))  # type: ignore[attr-defined]
    restored = {d.metadata.name for d in client.AppsV1Api(api).list_namespaced_deployment("team-nlp-velero").items}
    original = {d.metadata.name for d in client.AppsV1Api(api).list_namespaced_deployment("team-nlp").items}
    assert restored == original != set()


def test_an_imported_velero_backup_rehearses_into_a_fresh_lab(source: Source, cli: Cli, tmp_path: Path) -> None:
    store = _store(tmp_path)
    env = source.s3_env()
    location = f"s3://{BUCKET}/{PREFIX}"
    server = source.lab["kube-apiserver"].url  # type: ignore[attr-defined]
    proc = cli("--store", str(store), "import", "velero", BACKUP, "--from", location, "--source-server", server,
               "--json", env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stdout)
    assert imported["imported_from"]["backup"] == BACKUP and imported["imported_from"]["format_version"] == "1.1.0"
    assert any("API server's address" in line for line in imported["imported_from"]["not_captured"])
    repo = Repository.open(LocalBackend(store), Credentials(passphrase=PASSPHRASE))
    # the module's last test: the source stays down afterwards (starting its living lab, MinIO and Velero again only
    # for the teardown to stop them cost CPU and a wait on Velero's port); that a rehearsal starts its source
    # again is test_rehearsal.py's test_full_cluster_rebuild_into_a_fresh_lab_with_the_source_stopped
    options = RehearsalOptions(source=LabSource(source.lab), source_stays_down=True, out_dir=tmp_path / "reports",
                               labs_root=tmp_path / "labs")  # fmt: skip
    result = rehearse(load_plan(PLANS / "full-cluster-rebuild.yaml"), repo, options)
    steps = {s["id"]: s for s in result.report["run"]["steps"]}
    failed = [(c["name"], c["detail"]) for c in result.report["checks"] if not c["ok"]]
    assert steps["cluster-objects"]["status"] == "ok", steps["cluster-objects"]
    assert result.restored, failed
    assert set(result.report["run"]["rpo"]["per_plugin"]) == {"kubernetes"}
    assert not source.lab["kube-apiserver"].healthy()  # stopped for the rehearsal, and left so
