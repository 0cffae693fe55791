"""A store opened with its key: sealed chunks, manifests and key slots over a backend.

Write order (restic's rule): chunks first, manifest last. A backup exists iff its manifest exists, and a
manifest is only written after every chunk it names is durably stored. Sessions take a repository rather
than hang off it: a backup is ``drtool.repo.writer.BackupSession(repo)``, a plugin's view of a backup to
restore is ``drtool.repo.restore_context.PluginRestoreContext(repo, manifest, plugin)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from drtool.backends.backend import Backend
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import MANIFEST, MasterKey
from drtool.errors import IntegrityError, NotFound, ObjectExists, UsageError
from drtool.repo import layout, pack_index
from drtool.repo.codec import Codec
from drtool.repo.config import StoreConfig
from drtool.repo.loose import LooseStore
from drtool.repo.manifest import Manifest
from drtool.repo.packed import PackedStore


class Repository:
    def __init__(self, backend: Backend, config: StoreConfig, key: MasterKey, slot: slots.KeySlot | None) -> None:
        self.backend = backend
        self.config = config
        self.key = key
        self.unlocked_with = slot
        self.codec = Codec(config.compression_level, config.chunker.max_size)
        self.chunks: LooseStore | PackedStore = PackedStore(self) if config.packed else LooseStore(self)

    # --- opening ----------------------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        backend: Backend,
        passphrase: str | None = None,
        keyfile_secret: bytes | None = None,
        config: StoreConfig | None = None,
    ) -> Repository:
        """Create a store with a fresh master key and its first key slot (passphrase and/or key file)."""
        if not (passphrase or keyfile_secret):
            raise UsageError("a new store needs a passphrase or a key file", "set DRTOOL_PASSPHRASE or --keyfile")
        if backend.exists(layout.CONFIG):
            raise UsageError(f"{backend.url} already holds a drtool store", "use it as it is, or pick another URL")
        backend.create()
        config = config or StoreConfig.new()
        key = MasterKey.generate(config.store_id)
        first = None
        if passphrase:
            first = slots.passphrase_slot(key, passphrase)
            backend.put(layout.key_slot(first.id), first.to_bytes(), exclusive=True)
        if keyfile_secret:
            kf = slots.keyfile_slot(key, keyfile_secret)
            backend.put(layout.key_slot(kf.id), kf.to_bytes(), exclusive=True)
            first = first or kf
        # the config is written last: a store without it does not exist yet
        backend.put(layout.CONFIG, config.to_bytes(), exclusive=True)
        return cls(backend, config, key, first)

    @classmethod
    def read_config(cls, backend: Backend) -> StoreConfig:
        try:
            return StoreConfig.from_bytes(backend.get(layout.CONFIG), backend.url)
        except NotFound:
            raise NotFound(f"no drtool store at {backend.url}", "run `drtool init --store URL` first") from None

    @classmethod
    def open(cls, backend: Backend, credentials: Credentials) -> Repository:
        config = cls.read_config(backend)
        key, slot = credentials.unlock(config.store_id, cls.key_slots(backend))
        return cls(backend, config, key, slot)

    @staticmethod
    def key_slots(backend: Backend) -> list[slots.KeySlot]:
        return [slots.KeySlot.from_bytes(backend.get(name), name) for name in sorted(backend.list(layout.KEYS))]

    # --- key slots ----------------------------------------------------------------------------------

    def add_slot(self, slot: slots.KeySlot) -> None:
        self.backend.put(layout.key_slot(slot.id), slot.to_bytes(), exclusive=True)

    def remove_slot(self, slot_id: str) -> None:
        remaining = [s for s in self.key_slots(self.backend)]
        if slot_id not in {s.id for s in remaining}:
            raise NotFound(f"no key slot {slot_id}", "`drtool key list` shows the slots")
        if len(remaining) == 1:
            raise UsageError("refusing to remove the last key slot", "add another slot first; the store would be lost")
        self.backend.delete(layout.key_slot(slot_id))

    # --- chunks -------------------------------------------------------------------------------------

    def chunk_ids(self) -> Iterator[str]:
        """Every chunk the store holds: loose chunk objects (format 1), indexed ones (format 2)."""
        if isinstance(self.chunks, LooseStore):
            yield from self.chunks.ids()
        else:
            yield from pack_index.hex_ids(self.chunks.index(refresh=True).entries)

    # --- manifests ----------------------------------------------------------------------------------

    def put_manifest(self, manifest: Manifest) -> None:
        blob = self.key.seal(MANIFEST, manifest.id, manifest.encode())
        try:
            self.backend.put(layout.manifest(manifest.id), blob, exclusive=True)
        except ObjectExists:
            raise IntegrityError(f"backup id {manifest.id} already exists", "this should not happen; retry") from None

    def backup_ids(self) -> list[str]:
        ids = (layout.backup_id_of(n) for n in self.backend.list(layout.MANIFESTS))
        return sorted(i for i in ids if i)

    def get_manifest(self, backup_id: str) -> Manifest:
        if not layout.BACKUP_ID.match(backup_id):
            raise NotFound(
                f"{backup_id!r} is not a backup id", "ids look like 20261129T104500Z-1a2b3c; see `drtool list`"
            )
        try:
            blob = self.backend.get(layout.manifest(backup_id))
        except NotFound:
            raise NotFound(f"backup {backup_id} not found in store {self.backend.url}", "see `drtool list`") from None
        plain = self.key.unseal(MANIFEST, backup_id, blob)
        manifest = Manifest.decode(plain, backup_id)
        if manifest.store_id != self.config.store_id:
            raise IntegrityError(f"manifest {backup_id} belongs to store {manifest.store_id}")
        return manifest

    def resolve(self, ref: str) -> str:
        """A backup id from an id, a unique id prefix, or ``latest`` (see ``find_backup``)."""
        if ref == "latest":
            return self.find_backup(ref).id
        ids = self.backup_ids()
        matches = [i for i in ids if i.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise NotFound(f"backup {ref} not found in store {self.backend.url}", "see `drtool list`")
        raise UsageError(f"{ref!r} matches {len(matches)} backups", "give more of the id")

    def find_backup(self, ref: str, read: list[Manifest] | None = None) -> Manifest:
        """The manifest of the backup ``ref`` names (see ``resolve``): read once, then passed by value.

        ``latest`` is the newest *full* backup: a delta of a chain is restored through its chain's full
        (``--at``, docs/store-format.md "Delta chains"), never alone. Finding it reads manifests from the
        newest until one is not a delta; every manifest read is appended to ``read`` when given, so a run
        that needs the newer ones too (a point of a delta chain) does not read them again."""
        if ref != "latest":
            manifest = self.get_manifest(self.resolve(ref))
            if read is not None:
                read.append(manifest)
            return manifest
        newest = self.newest_manifest(self.backup_ids(), lambda m: not m.is_delta, read)
        if newest is None:
            raise NotFound(f"store {self.backend.url} holds no backups yet", "run `drtool backup` first")
        return newest

    def newest_manifest(
        self, ids: list[str], accept: Callable[[Manifest], bool], read: list[Manifest] | None = None
    ) -> Manifest | None:
        """The newest manifest of ``ids`` that ``accept`` takes (``manifests_newest_first``)."""
        return next((m for m in self.manifests_newest_first(ids, read=read) if accept(m)), None)

    def manifests_newest_first(
        self, ids: list[str], batch: int = 32, read: list[Manifest] | None = None
    ) -> Iterator[Manifest]:
        """Manifests of ``ids`` from the newest, read in parallel in growing batches (1, 2, 4, ... ``batch``),
        each once; every manifest read (also those read ahead of the one the caller stops at) goes to ``read``.

        The newest manifest is usually the one wanted, so it is read alone; a follower's deltas can make the
        newest full backup hundreds of manifests old, so the batches then grow to read those in parallel."""
        ordered = ids[::-1]
        with ThreadPoolExecutor(max_workers=min(batch, 16)) as pool:
            start, size = 0, 1
            while start < len(ordered):
                manifests = list(pool.map(self.get_manifest, ordered[start : start + size]))
                if read is not None:
                    read.extend(manifests)
                yield from manifests
                start, size = start + size, min(2 * size, batch)

    def delete_manifest(self, backup_id: str) -> None:
        self.backend.delete(layout.manifest(backup_id))
