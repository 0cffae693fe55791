"""Pins: what this machine has seen of each store, so a changed store key or config is noticed.

The first time a machine opens a store it records the store's key check, key generation, config hash and
owner key (drtool/crypto/owner.py) in ``<state dir>/pins/<store id>.json`` (0600; the state dir is
``DRTOOL_STATE_DIR``, else ``$XDG_STATE_HOME/drtool``, else ``~/.local/state/drtool``). From then on a key
is accepted only if it is the pinned one or a later generation that descends from it (``drtool key
rotate``), and only with the pinned config and owner key. The pin also names the slot that opened the
store, tried first next time (a store with planted passphrase slots then costs one Argon2 run, not one per
slot). docs/threat-model.md says what a machine without a pin can and cannot tell; a CronJob's pod keeps
no pins and names the key it expects instead (drtool/crypto/credentials.py ``Expected``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from drtool.files import replace_private

STATE_ENV = "DRTOOL_STATE_DIR"


@dataclasses.dataclass(frozen=True)
class Pin:
    store_id: str
    generation: int
    key_check: str
    config_sha256: str
    slot: str | None = None
    owner: str | None = None  # the owner key's public half the store recorded (None: a store without one)


class PinStore:
    """Pin files in one folder; ``PinStore(None)`` remembers nothing (for callers that opt out)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @classmethod
    def default(cls) -> PinStore:
        explicit = os.environ.get(STATE_ENV)
        if explicit:
            base = Path(explicit).expanduser()
        else:
            xdg = os.environ.get("XDG_STATE_HOME")
            base = (Path(xdg) if xdg else Path.home() / ".local/state") / "drtool"
        return cls(base / "pins")

    def _path(self, store_id: str) -> Path | None:
        if self.folder is None or not store_id.isalnum():
            return None
        return self.folder / f"{store_id}.json"

    def get(self, store_id: str) -> Pin | None:
        path = self._path(store_id)
        if path is None or not path.is_file():
            return None
        try:
            return Pin(**json.loads(path.read_text()))
        except (ValueError, TypeError, OSError):
            return None  # a damaged pin is no pin: the store is checked as on a new machine

    def put(self, pin: Pin) -> None:
        path = self._path(pin.store_id)
        if path is not None:
            replace_private(path, json.dumps(dataclasses.asdict(pin), indent=1))
