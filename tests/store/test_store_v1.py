"""The store format outlives releases: a store written by an earlier drtool reads back byte for byte.

``tests/data/store-v1`` was written by drtool 0.1.0 before the master key took over formatting the
associated data of sealed objects (docs/store-format.md): a passphrase slot, one backup of a plugin
``test`` holding ``data.bin`` (zstd chunk), and a shared lock left behind by its holder.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import CHUNK, KEY_SLOT, LOCK, MANIFEST, associated_data
from drtool.errors import IntegrityError
from drtool.repo.lock import list_locks
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext

STORE = Path(__file__).parents[1] / "data" / "store-v1"
PASSPHRASE = "v1 store passphrase"
BACKUP_ID = "20261201T145111Z-b12f58"


def _data() -> bytes:
    """The artifact's content, regenerated the way the fixture's writer made it."""
    rng = random.Random(1)
    return b"".join(rng.choice([b"alpha ", b"beta ", b"gamma ", bytes([rng.randrange(256)])]) for _ in range(8000))


@pytest.fixture
def v1(tmp_path: Path) -> Repository:
    copy = tmp_path / "store"
    shutil.copytree(STORE, copy)
    return Repository.open(open_backend(str(copy)), Credentials(passphrase=PASSPHRASE))


def test_a_v1_store_reads_back(v1: Repository) -> None:
    assert v1.backup_ids() == [BACKUP_ID]
    manifest = v1.get_manifest(BACKUP_ID)
    assert manifest.backup_set == "v1" and manifest.tags == ["fixture"]
    assert manifest.plugins["test"].meta == {"kind": "fixture"}
    with PluginRestoreContext(v1, v1.find_backup(BACKUP_ID), "test").open("data.bin") as source:
        assert source.read() == _data()
    (lock,) = list_locks(v1)
    assert lock.error is None and lock.owner == "fixture holder" and lock.kind == "shared"


def test_what_is_sealed_now_binds_the_v1_associated_data(v1: Repository) -> None:
    """docs/store-format.md: every sealed object is bound to ``drtool-<kind>-v1:<store id>:<name>``."""
    sid = v1.config.store_id
    assert associated_data(CHUNK, sid, "ab" * 32) == f"drtool-chunk-v1:{sid}:{'ab' * 32}".encode()
    assert associated_data(MANIFEST, sid, BACKUP_ID) == f"drtool-manifest-v1:{sid}:{BACKUP_ID}".encode()
    assert associated_data(LOCK, sid, "x") == f"drtool-lock-v1:{sid}:x".encode()
    assert associated_data(KEY_SLOT, sid, "5dce3a57") == f"drtool-keyslot-v1:{sid}:5dce3a57".encode()
    blob = v1.key.seal(MANIFEST, BACKUP_ID, b"payload")
    assert v1.key.unseal(MANIFEST, BACKUP_ID, blob) == b"payload"
    with pytest.raises(IntegrityError, match=r"lock .* failed authentication"):
        v1.key.unseal(LOCK, BACKUP_ID, blob)  # another kind of object under the same name
