"""Object names in a store, in one place (docs/store-format.md §Layout)."""

from __future__ import annotations

import datetime as dt
import re
import secrets

CONFIG = "drtool-store.json"
KEYS = "keys/"
CHUNKS = "chunks/"
MANIFESTS = "manifests/"
LOCKS = "locks/"
PACKS = "packs/"  # format 2
INDEX = "index/"  # format 2
JOBS = "jobs/"  # sharded backups in progress (docs/scaling.md)

BACKUP_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")
CHUNK_ID = re.compile(r"^[0-9a-f]{64}$")
LOCK_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{16}$")
PACK_ID = re.compile(r"^[0-9a-f]{32}$")
INDEX_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{16}$")
JOB_ID = re.compile(r"^[0-9a-z][0-9a-z.-]{0,62}$")
PART_NAME = re.compile(r"^part-[0-9]{5,9}$")

# Defaults the CLI shows in its help, here rather than in the modules that use them so that `drtool --help`
# shows them without importing the store: seconds a writer waits for a prune holding the store exclusively (one
# usually finishes within minutes), and the backup set of `drtool follow`.
DEFAULT_LOCK_WAIT = 300.0
DEFAULT_FOLLOW_SET = "follow"  # the backup set `drtool follow` writes its chain into unless told


def chunk(chunk_id: str) -> str:
    return f"{CHUNKS}{chunk_id[:2]}/{chunk_id}"


def chunk_id_of(name: str) -> str | None:
    tail = name.rsplit("/", 1)[-1]
    return tail if name.startswith(CHUNKS) and CHUNK_ID.match(tail) else None


def manifest(backup_id: str) -> str:
    return f"{MANIFESTS}{backup_id}"


def backup_id_of(name: str) -> str | None:
    tail = name[len(MANIFESTS) :] if name.startswith(MANIFESTS) else ""
    return tail if BACKUP_ID.match(tail) else None


def key_slot(slot_id: str) -> str:
    return f"{KEYS}{slot_id}"


def lock(lock_id: str) -> str:
    return f"{LOCKS}{lock_id}"


def lock_id_of(name: str) -> str | None:
    tail = name[len(LOCKS) :] if name.startswith(LOCKS) else ""
    return tail if LOCK_ID.match(tail) else None


def new_lock_id(created: dt.datetime) -> str:
    """Creation time first, so a listing reads oldest first; 64 random bits so two hosts never collide."""
    return f"{created:%Y%m%dT%H%M%SZ}-{secrets.token_hex(8)}"


def pack(pack_id: str) -> str:
    return f"{PACKS}{pack_id[:2]}/{pack_id}"


def pack_id_of(name: str) -> str | None:
    tail = name.rsplit("/", 1)[-1]
    return tail if name.startswith(PACKS) and PACK_ID.match(tail) else None


def new_pack_id() -> str:
    """128 random bits: packs from concurrent writers (hosts, Indexed Job workers) never collide."""
    return secrets.token_hex(16)


def index(index_id: str) -> str:
    return f"{INDEX}{index_id}"


def index_id_of(name: str) -> str | None:
    tail = name[len(INDEX) :] if name.startswith(INDEX) else ""
    return tail if INDEX_ID.match(tail) else None


def new_index_id() -> str:
    return new_lock_id(dt.datetime.now(dt.UTC))


def job_part(job_id: str, index: int) -> str:
    return f"{JOBS}{job_id}/part-{index:05d}"


def part_index_of(tail: str) -> int | None:
    """The worker index of a shard part's file name (``part-00003``), None for any other name."""
    return int(tail[5:]) if PART_NAME.match(tail) else None


def job_parts(job_id: str) -> str:
    return f"{JOBS}{job_id}/"
