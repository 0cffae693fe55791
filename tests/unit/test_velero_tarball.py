"""The Velero tarball parser and the import's refusals, on small backups laid out as Velero v1.18 writes them.

The layout (``resources/<resource.group>/{cluster|namespaces/<ns>}/<name>.json`` plus the
``<version>-preferredversion`` copies, ``metadata/version``) is Velero's; the real thing, written by a Velero
server built from its module, is parsed and imported in tests/plans_rehearsal/test_velero_import.py. These
tests need no server: they check each refusal on its own, and that a refused import leaves the store as it was.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from drtool.errors import DrtoolError, IntegrityError, SourceError, UsageError
from drtool.repo.repository import Repository
from drtool.velero.importer import import_backup
from drtool.velero.tarball import parse

Obj = dict[str, Any]
NAME = "nightly"
OBJECTS: list[tuple[str, Obj]] = [
    ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "status": {}}),
    (
        "configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team-a", "uid": "u1"}},
    ),
    (
        "deployments.apps",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a", "uid": "u2"},
            "spec": {"replicas": 1},
            "status": {"replicas": 1},
        },
    ),
]


def _path(gr: str, obj: Obj, version: str = "") -> str:
    meta = obj["metadata"]
    scope = f"namespaces/{meta['namespace']}" if meta.get("namespace") else "cluster"
    return "/".join(p for p in ("resources", gr, version, scope, f"{meta['name']}.json") if p)


def tarball(objects: list[tuple[str, Obj]] = OBJECTS, extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        files = {"metadata/version": b"1.1.0\n"}
        for gr, obj in objects:
            body = json.dumps(obj).encode()
            files[_path(gr, obj)] = body
            files[_path(gr, obj, obj["apiVersion"].rpartition("/")[2] + "-preferredversion")] = body
        for name, body in {**files, **(extra or {})}.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return gzip.compress(buf.getvalue())


def backup_json(phase: str = "Completed", fmt: str = "1.1.0", items: int = len(OBJECTS)) -> bytes:
    status = {"phase": phase, "formatVersion": fmt, "progress": {"itemsBackedUp": items, "totalItems": items}}
    status |= {"startTimestamp": "2026-12-05T10:00:00Z", "completionTimestamp": "2026-12-05T10:00:09Z"}
    meta = {"name": NAME, "namespace": "velero", "labels": {"velero.io/storage-location": "default"}}
    return json.dumps({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": meta, "status": status}).encode()


def bucket(root: Path, tar: bytes, meta: bytes) -> str:
    """A local copy of a location: ``<root>/backups/<name>/...`` as Velero lays its bucket out."""
    folder = root / "backups" / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME}.tar.gz").write_bytes(tar)
    (folder / "velero-backup.json").write_bytes(meta)
    return str(root)


def store_files(repo: Repository) -> dict[str, int]:
    root = Path(repo.backend.url)
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_the_unversioned_copy_of_each_object_is_read_grouped_by_type() -> None:
    found = parse(tarball(), "t.tar.gz")
    assert found.format_version == "1.1.0" and found.versioned_copies == len(OBJECTS) == found.objects
    assert sorted(found.resources) == ["configmaps", "deployments.apps", "namespaces"]
    deployments = found.resources["deployments.apps"]
    assert (deployments.group, deployments.resource, deployments.namespaced) == ("apps", "deployments", True)
    assert not found.resources["namespaces"].namespaced
    assert ("apps/v1/Deployment", "team-a/web") in found.listed()


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def _bad_header() -> bytes:
    """A header in the middle of the archive damaged: Python's tarfile would end the archive there silently."""
    raw = bytearray(gzip.decompress(tarball()))
    raw[512 * 2 + 148] ^= 0x01  # the checksum field of the second member's header
    return gzip.compress(bytes(raw))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (tarball()[:-20], "is truncated"),
        (_flip(tarball(), 40), "is damaged: gzip says"),
        (_bad_header(), "the tar stops at byte"),
        (tarball() + b"junk", "bytes after its gzip stream"),
        (gzip.compress(b"not a tar" * 100), "is damaged: tar says"),
        (tarball(extra={"etc/passwd": b"x"}), "unexpected entry 'etc/passwd'"),
        (tarball(extra={"resources/pods/namespaces/a/p.json": b"{"}), "resources/pods/namespaces/a/p.json is not JSON"),
        (
            tarball(extra={"resources/pods/namespaces/team-a/web.json": json.dumps(OBJECTS[2][1]).encode()}),
            "holds an object of API group 'apps', not ''",
        ),
        (
            tarball(extra={"resources/configmaps/namespaces/b/cfg.json": json.dumps(OBJECTS[1][1]).encode()}),
            "holds team-a/cfg, not the object its path names",
        ),
    ],
    ids=[
        "truncated",
        "flipped-byte",
        "damaged-header",
        "trailing-bytes",
        "not-tar",
        "foreign-entry",
        "not-json",
        "wrong-group",
        "moved-object",
    ],
)
def test_a_damaged_tarball_is_refused_naming_it(data: bytes, message: str) -> None:
    with pytest.raises(IntegrityError, match=message) as caught:
        parse(data, "s3://velero/backups/nightly/nightly.tar.gz")
    assert caught.value.message.startswith("s3://velero/backups/nightly/nightly.tar.gz")
    assert "\n" not in caught.value.one_line()


@pytest.mark.parametrize(
    ("tar", "meta", "error", "message"),
    [
        (tarball(), backup_json("InProgress"), SourceError, "Velero backup nightly is InProgress, not Completed"),
        (tarball(), backup_json("PartiallyFailed"), SourceError, "Velero backup nightly is PartiallyFailed"),
        (tarball(), backup_json(fmt="2.0.0"), UsageError, "Velero backup nightly has format version '2.0.0'"),
        (tarball(), backup_json(items=7), IntegrityError, "holds 3 objects, its velero-backup.json says 7"),
        (tarball()[:-20], backup_json(), IntegrityError, "nightly.tar.gz is truncated"),
        (tarball(), b"{", IntegrityError, "velero-backup.json is not JSON"),
    ],
    ids=["in-progress", "partially-failed", "unknown-format", "count", "truncated", "metadata"],
)
def test_a_refused_import_writes_nothing_to_the_store(
    repo: Repository, tmp_path: Path, tar: bytes, meta: bytes, error: type[DrtoolError], message: str
) -> None:
    url = bucket(tmp_path / "bucket", tar, meta)
    before = store_files(repo)
    with pytest.raises(error, match=message):
        import_backup(repo, url, NAME)
    assert store_files(repo) == before and repo.backup_ids() == []


def test_an_import_is_the_kubernetes_plugins_backup_with_velero_times_and_provenance(
    repo: Repository, tmp_path: Path
) -> None:
    imported = import_backup(repo, bucket(tmp_path / "bucket", tarball(), backup_json()), NAME)
    manifest = repo.get_manifest(imported.manifest.id)
    outcome = manifest.plugins["kubernetes"]
    assert (outcome.started, outcome.finished) == ("2026-12-05T10:00:00Z", "2026-12-05T10:00:09Z")
    assert outcome.meta["imported_from"]["backup"] == NAME and outcome.meta["imported_from"]["location"] == "default"
    assert "imported-from-velero" in manifest.tags
    assert {a.name for a in manifest.artifacts} == {
        "resources/core/namespaces.ndjson",
        "resources/core/configmaps.ndjson",
        "resources/apps/deployments.ndjson",
    }
    deployments = next(a for a in manifest.artifacts if a.name == "resources/apps/deployments.ndjson")
    assert deployments.meta["status_subresource"] and not deployments.meta["crd"]
    assert outcome.meta["resources"]["deployments.apps"]["count"] == 1
