"""A store opened with its key: sealed chunks, manifests and key slots over a backend.

Write order (restic's rule): chunks first, manifest last. A backup exists iff its manifest exists, and a
manifest is only written after every chunk it names is durably stored. Sessions take a repository rather
than hang off it: a backup is ``drtool.repo.writer.BackupSession(repo)``, a plugin's view of a backup to
restore is ``drtool.repo.restore_context.PluginRestoreContext(repo, manifest, plugin)``.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from drtool.backends.backend import Backend
from drtool.crypto import slots
from drtool.crypto.credentials import Credentials
from drtool.crypto.master import MANIFEST, MasterKey
from drtool.crypto.owner import OwnerKey
from drtool.errors import IntegrityError, NotFound, ObjectExists, UsageError, WrongKey
from drtool.repo import keyring, layout, pack_index, times, unlock
from drtool.repo.codec import Codec
from drtool.repo.config import StoreConfig
from drtool.repo.loose import LooseStore
from drtool.repo.manifest import Manifest
from drtool.repo.packed import PackedStore
from drtool.repo.pins import Pin, PinStore

log = logging.getLogger(__name__)


class Repository:
    def __init__(
        self,
        backend: Backend,
        config: StoreConfig,
        key: MasterKey,
        slot: slots.KeySlot | None,
        *,
        trust: keyring.Trust | None = None,
        max_skew: dt.timedelta = times.DEFAULT_MAX_SKEW,
        owner: OwnerKey | None = None,
    ) -> None:
        """A store opened with ``key``. Without ``trust`` (a plan step's process, handed a key drtool already
        checked) the key's records are read from the store for its retired keys and gear table. ``owner``: the
        store owner's signing key, when the credentials that opened it hold it (rotations need it)."""
        self.backend = backend
        self.config = config
        self.key = key
        self.unlocked_with = slot
        self.trust = trust or keyring.attach_ring(key, keyring.read_records(backend)[0])
        self.max_skew = max_skew
        self.owner = owner
        self.codec = Codec(config.compression_level, config.chunker.max_size)
        self.chunks: LooseStore | PackedStore = PackedStore(self) if config.packed else LooseStore(self)
        self.skipped: dict[str, str] = {}  # object name -> why it was passed over (``skip``)
        self.on_skip: Callable[[str], None] = _log_skip  # the CLI prints a warning line instead
        self._skip_lock = threading.Lock()

    @property
    def warnings(self) -> list[str]:
        """What opening the store found and ignored (planted or malformed slots, records), one line each."""
        return self.trust.warnings

    def skip(self, name: str, reason: str) -> None:
        """Pass over the object ``name`` (it does not authenticate, or its name or contents do not parse),
        saying so once per process: anyone who can write the store can plant one, so an operation that does
        not need that object must go on (docs/threat-model.md, "A keyless store writer")."""
        with self._skip_lock:
            if name in self.skipped:
                return
            self.skipped[name] = reason
        self.on_skip(f"{name} ignored: {reason}")

    @property
    def gear(self) -> tuple[bytes | None, int]:
        """The chunker's gear table: (byte permutation, seed) of this key generation, or the 32-bit seed of
        a store made before keyed gear tables (docs/store-format.md)."""
        if self.trust.gear == keyring.GEAR_KEYED:
            return self.key.gear()
        return None, self.key.chunker_seed

    def require_current(self, action: str) -> None:
        """Refuse to write with a key that `drtool key rotate` retired: what it writes, its holders read."""
        if self.trust.retired_by:
            raise WrongKey(
                f"cannot {action}: this key was retired by `drtool key rotate` ({self.trust.retired_by}); it "
                "opens backups written before then, and writes nothing",
                "use a credential of the store's current key",
            )

    # --- opening ----------------------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        backend: Backend,
        passphrase: str | None = None,
        keyfile_secret: bytes | None = None,
        config: StoreConfig | None = None,
        *,
        pins: PinStore | None = None,
    ) -> Repository:
        """Create a store with a fresh master key and its first key slot (passphrase and/or key file).

        Write order: slots, then the key record (the key check, the config's hash, the gear table, the owner
        key), then the config: a store without its config does not exist yet. The owner key that signs key
        rotations (drtool/crypto/owner.py) is made only with a passphrase, the one slot it is sealed into:
        a key file never holds it."""
        if not (passphrase or keyfile_secret):
            raise UsageError("a new store needs a passphrase or a key file", "set DRTOOL_PASSPHRASE or --keyfile")
        if backend.exists(layout.CONFIG):
            raise UsageError(f"{backend.url} already holds a drtool store", "use it as it is, or pick another URL")
        backend.create()
        config = config or StoreConfig.new()
        config_bytes = config.to_bytes()
        key = MasterKey.generate(config.store_id)
        owner = OwnerKey.generate() if passphrase else None
        made = []
        if passphrase:
            made.append(slots.passphrase_slot(key, passphrase, owner=owner))
        if keyfile_secret:
            made.append(slots.keyfile_slot(key, keyfile_secret))
        for slot in made:
            backend.put(layout.key_slot(slot.id), slot.to_bytes(), exclusive=True)
        root = keyring.root_record(key, config_bytes, keyring.GEAR_KEYED, owner)
        keyring.write_record(backend, root)
        backend.put(layout.CONFIG, config_bytes, exclusive=True)  # last: a store without it does not exist yet
        trust = keyring.establish(key, [root], config_bytes)
        trust.owner_key = root.get("owner")
        (pins or PinStore.default()).put(
            Pin(config.store_id, 0, key.key_check, keyring.config_digest(config_bytes), made[0].id, root.get("owner"))
        )
        return cls(backend, config, key, made[0], trust=trust, owner=owner)

    @classmethod
    def read_config(cls, backend: Backend) -> StoreConfig:
        return StoreConfig.from_bytes(cls.config_bytes(backend), backend.url)

    @staticmethod
    def config_bytes(backend: Backend) -> bytes:
        try:
            return backend.get(layout.CONFIG)
        except NotFound:
            raise NotFound(f"no drtool store at {backend.url}", "run `drtool init --store URL` first") from None

    @classmethod
    def open(
        cls,
        backend: Backend,
        credentials: Credentials,
        *,
        pins: PinStore | None = None,
        max_skew: dt.timedelta = times.DEFAULT_MAX_SKEW,
    ) -> Repository:
        """Open the store with the key ``credentials`` unlock, once it is shown to be the store's own
        (drtool/repo/unlock.py); ``pins``: what this machine has seen of stores (default: the user's)."""
        config_bytes = cls.config_bytes(backend)
        config = StoreConfig.from_bytes(config_bytes, backend.url)
        opened = unlock.unlock(backend, config.store_id, config_bytes, credentials, pins or PinStore.default())
        return cls(backend, config, opened.key, opened.slot, trust=opened.trust, max_skew=max_skew, owner=opened.owner)

    @staticmethod
    def key_slots(backend: Backend) -> list[slots.KeySlot]:
        """The slots in ``keys/`` this drtool can read (``slot_listing`` also says which it cannot, and why)."""
        return Repository.slot_listing(backend)[0]

    @staticmethod
    def slot_listing(backend: Backend) -> tuple[list[slots.KeySlot], dict[str, str]]:
        """Every slot under ``keys/``: those that parse, and the others by id with the reason they are ignored."""
        return unlock.slot_listing(backend)

    # --- key slots ----------------------------------------------------------------------------------

    def add_slot(self, slot: slots.KeySlot) -> None:
        self.require_current("add a key slot")
        self.backend.put(layout.key_slot(slot.id), slot.to_bytes(), exclusive=True)

    def remove_slot(self, slot_id: str) -> None:
        remaining = self.key_slots(self.backend)
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
        """Every backup's id; with a retired key, those written before it was retired (all it can read)."""
        ids = []
        for name in self.backend.list(layout.MANIFESTS):
            backup_id = layout.backup_id_of(name)
            if not backup_id:
                self.skip(name, "not a backup id")
            elif self.key.may_open(MANIFEST, backup_id):
                ids.append(backup_id)
        return sorted(ids)

    def get_manifest(self, backup_id: str) -> Manifest:
        """A backup's manifest, with what the store says of it: when it was stored, whether its stated times
        agree (``Manifest.flag``), and which key generation sealed it."""
        return self.open_manifest(backup_id, *self.fetch_manifest(backup_id))

    def fetch_manifest(self, backup_id: str) -> tuple[bytes, dt.datetime | None]:
        """A manifest's sealed bytes and when the store received them: the I/O half of ``get_manifest``, for
        readers that fetch many in parallel and open them one at a time (prune: bounded memory)."""
        if not layout.BACKUP_ID.match(backup_id):
            raise NotFound(
                f"{backup_id!r} is not a backup id", "ids look like 20261129T104500Z-1a2b3c; see `drtool list`"
            )
        try:
            return self.backend.get_timed(layout.manifest(backup_id))
        except NotFound:
            raise NotFound(f"backup {backup_id} not found in store {self.backend.url}", "see `drtool list`") from None

    def open_manifest(
        self, backup_id: str, blob: bytes, stored: dt.datetime | None, lighten: Callable[[bytes], bytes] | None = None
    ) -> Manifest:
        """The manifest in ``blob`` (from ``fetch_manifest``), authenticated, decoded (see ``Manifest.decode``
        for ``lighten``) and judged."""
        plain, sealer = self.key.opener(MANIFEST, backup_id, blob)
        manifest = Manifest.decode(plain, backup_id, lighten)
        if manifest.store_id != self.config.store_id:
            raise IntegrityError(f"manifest {backup_id} belongs to store {manifest.store_id}")
        flag = self.judge(manifest, stored)
        first = self._received_first(backup_id) if flag is not None and stored is not None else None
        if first is not None and stored is not None and first < stored:  # the same bytes, received earlier
            stored, flag = first, self.judge(manifest, first)
        return manifest.mark(stored, flag, sealer.generation)

    def _received_first(self, backup_id: str) -> dt.datetime | None:
        """When a versioned store first received the manifest's current bytes (S3: its oldest version with
        the same ETag), or None: a re-PUT of the same bytes must not make a genuine backup look back-dated."""
        received_first = getattr(self.backend, "received_first", None)
        return received_first(layout.manifest(backup_id)) if received_first else None

    def judge(self, manifest: Manifest, stored: dt.datetime | None) -> str | None:
        """Why ``manifest``'s times are not believed, given when the store received it (drtool/repo/times.py)."""
        chain_time = manifest.chain.last_time if manifest.chain else None
        return times.suspicion(manifest.id, manifest.started, manifest.finished, stored, self.max_skew, chain_time)

    def stored_times(self) -> dict[str, dt.datetime]:
        """When the store received each manifest (one listing), by backup id."""
        listed = ((layout.backup_id_of(n), t) for n, t in self.backend.list_timed(layout.MANIFESTS))
        return {i: t for i, t in listed if i}

    def resolve(self, ref: str) -> str:
        """A backup id from an id, a unique id prefix, or ``latest`` (see ``find_backup``)."""
        if ref == "latest":
            return self.find_backup(ref).id
        ids = self.backup_ids()
        matches = [i for i in ids if i.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches and not self.key.may_open(MANIFEST, ref) and self.backend.exists(layout.manifest(ref)):
            self.key.opener(MANIFEST, ref, b"")  # raises: written after this key was retired
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
        seen: list[Manifest] = [] if read is None else read
        newest = self.newest_manifest(self.backup_ids(), lambda m: not m.is_delta and m.trusted, seen)
        newest = newest or self.despite_moved_times(seen, lambda m: not m.is_delta)
        if newest is None:
            note = flagged_note(seen)
            what = f"no backup to restore{note}" if note else "no backups yet"
            raise NotFound(f"store {self.backend.url} holds {what}", NO_BACKUP_HINT)
        return newest

    def despite_moved_times(self, read: list[Manifest], accept: Callable[[Manifest], bool]) -> Manifest | None:
        """`latest` when no backup ``accept`` takes is trusted: the newest of them that is flagged only as
        back-dated, with a warning, or None.

        A store's time can only move *later* (a copy, a file replaced, a ``chmod`` where the filesystem keeps
        no birth time), never earlier; so when every candidate looks back-dated the anchor moved, and
        flagging must not leave `latest` empty. This trusts no forgery more than a key holder already gets:
        one who writes a backup *now* with honest times makes it `latest` anyway, and a writer without the
        key cannot write a manifest at all. Dated into the future, or inconsistent: never chosen.
        ``latest-before`` has no such fallback (a back-dated forgery is exactly what would steer it)."""
        moved = [m for m in read if accept(m) and not m.trusted and self.only_back_dated(m)]
        if not moved:
            return None
        chosen = max(moved, key=_newness)
        log.warning(
            "no candidate for latest is vouched for by the store's clock: %d look back-dated, so its times moved "
            "(a copied store, files replaced, or a chmod on a filesystem without birth times); using the newest "
            "by its id, %s (`drtool check` lists them; docs/threat-model.md)",
            len(moved),
            chosen.id,
        )
        return chosen

    def only_back_dated(self, manifest: Manifest) -> bool:
        """Whether ``manifest`` is flagged for its store time alone: judged as if received when it says it
        finished, nothing is wrong with it."""
        if manifest.stored is None or manifest.trusted:
            return False
        finished = times.parse_time(manifest.finished)
        return manifest.stored > finished and self.judge(manifest, finished) is None

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
        newest full backup hundreds of manifests old, so the batches then grow to read those in parallel.
        A manifest that does not open (damaged, or written with a key that is not the store's) is passed
        over with a warning: anyone who can write ``manifests/`` could otherwise stop every `latest`."""
        ordered = ids[::-1]
        with ThreadPoolExecutor(max_workers=min(batch, 16)) as pool:
            start, size = 0, 1
            while start < len(ordered):
                end = _whole_seconds(ordered, start + size)
                opened = pool.map(self._readable_manifest, ordered[start:end])
                manifests = sorted((m for m in opened if m is not None), key=_newness, reverse=True)
                if read is not None:
                    read.extend(manifests)
                yield from manifests
                start, size = end, min(2 * size, batch)

    def _readable_manifest(self, backup_id: str) -> Manifest | None:
        try:
            return self.get_manifest(backup_id)
        except IntegrityError as exc:
            self.skip(layout.manifest(backup_id), exc.message)
            return None

    def delete_manifest(self, backup_id: str) -> None:
        self.backend.delete(layout.manifest(backup_id))


def _whole_seconds(ordered: list[str], end: int) -> int:
    """``end`` moved past the ids (newest first) made in the same second as the one before it, so a batch
    never splits a second: its manifests are ordered by their times only when read together."""
    while 0 < end < len(ordered) and times.id_second(ordered[end]) == times.id_second(ordered[end - 1]):
        end += 1
    return end


def _newness(manifest: Manifest) -> tuple[str, str, str, str]:
    """``times.newness`` by the times its authenticated manifest states."""
    return times.newness(manifest.id, manifest.finished, manifest.started)


def _log_skip(line: str) -> None:
    log.warning("%s", line)


NO_BACKUP_HINT = "run `drtool backup` first, or name a backup by its id (`drtool list`)"


def flagged_note(read: list[Manifest]) -> str:
    """What to tell a user for whom `latest` found nothing: the flagged backups it passed over, if any."""
    flagged = [m for m in read if not m.trusted]
    if not flagged:
        return ""
    return (
        f" ({len(flagged)} flagged backup(s) passed over, e.g. {flagged[0].id}: {flagged[0].flag}; a copied "
        "store needs `max_clock_skew` raised, docs/threat-model.md)"
    )
