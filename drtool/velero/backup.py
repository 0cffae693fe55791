"""One Velero backup read from its storage location and checked, before anything goes into drtool's store.

Velero's object-store layout (``pkg/persistence/object_store_layout.go``): under the location's bucket and
prefix, ``backups/<name>/velero-backup.json`` (the Backup object with its status), ``<name>.tar.gz`` (the
objects, ``tarball.py``) and ``<name>-resource-list.json.gz`` (``{"apps/v1/Deployment": ["ns/name", ...]}``).
The location is read through drtool's own backends, so it is named like a store: ``s3://bucket/prefix`` with
the usual AWS_* settings (AWS_ENDPOINT_URL for MinIO), or a local copy of the bucket.

Only a backup Velero calls ``Completed``, in a format version this module knows, is accepted; its resource
list and its item count must agree with the tarball. Each refusal is one line naming the object.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from typing import Any

from drtool.backends.backend import open_backend
from drtool.errors import IntegrityError, NotFound, SourceError, UsageError
from drtool.plugin.toolkit import paths

from .tarball import Tarball, gunzip, parse

Obj = dict[str, Any]
KNOWN_FORMATS = ("1.1.0",)  # Velero's BackupFormatVersion since v1.4, still in v1.18
STORAGE_LOCATION_LABEL = "velero.io/storage-location"
K8S_VERSION_ANNOTATION = "velero.io/source-cluster-k8s-gitversion"
MAX_LISTED = 3


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where an imported backup came from: recorded in the manifest, shown by `drtool show`."""

    tool: str
    backup: str
    location: str  # the BackupStorageLocation's name (Velero's label on the backup)
    url: str  # where drtool read it
    format_version: str
    source_kubernetes_version: str | None
    started: str
    completed: str
    items: int
    warnings: int
    spec: Obj  # the Backup's spec: Velero's filters, what it was asked to leave out

    def as_meta(self) -> Obj:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class VeleroBackup:
    provenance: Provenance
    tarball: Tarball
    status: Obj  # the Backup's status, as Velero left it (volume snapshot counts, ...)


def read_backup(url: str, name: str) -> VeleroBackup:
    """Fetch and check backup ``name`` from the location ``url``; nothing is written anywhere."""
    paths.segment(name, "Velero backup name")
    backend = open_backend(url)
    where = f"{url.rstrip('/')}/backups/{name}"

    def fetch(key: str) -> bytes | None:
        try:
            return backend.get(f"backups/{name}/{key}")
        except NotFound:
            return None

    raw_meta = fetch("velero-backup.json")
    if raw_meta is None:
        raise NotFound(f"no Velero backup {name!r} at {url}", f"`velero backup get` lists them; is {url} its bucket?")
    backup = _backup_object(raw_meta, f"{where}/velero-backup.json", name)
    status, spec = backup.get("status") or {}, backup.get("spec") or {}
    _check_status(status, name)
    tar_bytes = fetch(f"{name}.tar.gz")
    if tar_bytes is None:
        raise IntegrityError(f"Velero backup {name} is Completed but {where}/{name}.tar.gz is missing")
    tarball = parse(tar_bytes, f"{where}/{name}.tar.gz")
    if tarball.format_version != status.get("formatVersion"):
        raise IntegrityError(
            f"{where}/{name}.tar.gz is format {tarball.format_version!r}, "
            f"its velero-backup.json says {status.get('formatVersion')!r}"
        )
    _check_count(tarball, status, f"{where}/{name}.tar.gz")
    listing = fetch(f"{name}-resource-list.json.gz")
    if listing is not None:
        _check_listing(tarball, listing, f"{where}/{name}-resource-list.json.gz")
    meta = backup.get("metadata") or {}
    provenance = Provenance(
        tool="velero",
        backup=name,
        location=(meta.get("labels") or {}).get(STORAGE_LOCATION_LABEL) or spec.get("storageLocation") or "",
        url=url,
        format_version=str(status["formatVersion"]),
        source_kubernetes_version=(meta.get("annotations") or {}).get(K8S_VERSION_ANNOTATION),
        started=str(status.get("startTimestamp") or ""),
        completed=str(status.get("completionTimestamp") or ""),
        items=tarball.objects,
        warnings=int(status.get("warnings") or 0),
        spec=spec,
    )
    return VeleroBackup(provenance, tarball, status)


def _backup_object(raw: bytes, where: str, name: str) -> Obj:
    try:
        backup = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{where} is not JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(backup, dict) or backup.get("kind") != "Backup" or backup.get("apiVersion") != "velero.io/v1":
        raise IntegrityError(f"{where} is not a velero.io/v1 Backup")
    if (backup.get("metadata") or {}).get("name") != name:
        raise IntegrityError(f"{where} describes backup {(backup.get('metadata') or {}).get('name')!r}, not {name!r}")
    return backup


def _check_status(status: Obj, name: str) -> None:
    phase = status.get("phase")
    if phase == "PartiallyFailed":
        raise SourceError(
            f"Velero backup {name} is PartiallyFailed ({status.get('errors', '?')} errors): objects Velero could not "
            "back up are missing from it",
            "`velero backup logs` says which; import a Completed backup",
        )
    if phase != "Completed":
        raise SourceError(f"Velero backup {name} is {phase or 'without a phase'}, not Completed",
                          "import it once Velero has completed it")  # fmt: skip
    version = status.get("formatVersion")
    if version not in KNOWN_FORMATS:
        raise UsageError(
            f"Velero backup {name} has format version {version!r}; drtool reads {', '.join(KNOWN_FORMATS)}",
            "a newer drtool may read it",
        )


def _check_count(tarball: Tarball, status: Obj, where: str) -> None:
    said = (status.get("progress") or {}).get("itemsBackedUp")
    if said is not None and int(said) != tarball.objects:
        raise IntegrityError(f"{where} holds {tarball.objects} objects, its velero-backup.json says {said}")


def _check_listing(tarball: Tarball, data: bytes, where: str) -> None:
    """The resource list Velero wrote next to the tarball names exactly the tarball's objects."""
    try:
        listing = json.loads(gunzip(data, where))
        listed = {(kind, entry) for kind, entries in listing.items() for entry in entries}
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError, gzip.BadGzipFile) as exc:
        raise IntegrityError(f"{where} is not a resource list: {str(exc).splitlines()[0]}") from None
    held = tarball.listed()
    for missing, side in ((listed - held, "missing from the tarball"), (held - listed, "not in the resource list")):
        if missing:
            first = ", ".join(f"{k} {e}" for k, e in sorted(missing)[:MAX_LISTED])
            raise IntegrityError(f"{where}: {len(missing)} object(s) {side} ({first})")
