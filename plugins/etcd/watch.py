"""etcd's watch stream over the JSON gateway, read by a thread into a small bounded queue.

Why a thread: the follower must write a delta every N seconds even while no event arrives, and a read
blocked on the socket cannot wait for a clock. Why a *bounded* queue: when the store is slow (a prune
holds it) the follower stops taking messages, the thread stops reading, TCP pushes back, and etcd parks
the watcher and later catches it up from its own history. Memory stays bounded; nothing is lost unless
etcd compacts past the watcher meanwhile, which the follower then sees as a compaction.

``/v3/watch`` on the gateway is one create request per HTTP stream, so a stream that breaks or goes
quiet for ``idle`` seconds (the gateway cannot ask for progress notifications) is simply opened again
from the next revision; the follower drops what it already has, so reconnects never duplicate events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
from typing import Any

import requests

from drtool.errors import SourceError

from .client import ALL_KEYS, EtcdClient, _reason, b64, stream_result
from .deltas import now_text

QUEUE_SIZE = 8  # gateway messages (a message holds at most ~1000 revisions' events)
PATH = "/v3/watch"


@dataclasses.dataclass(frozen=True)
class Message:
    """One item from the watch thread: a gateway result with its arrival time, or why the stream ended."""

    result: dict[str, Any] | None
    time: str
    error: str | None = None  # set when the stream broke (or went quiet for ``idle`` seconds)


class WatchStream:
    """Watches the whole keyspace from ``start`` with ``prev_kv``; read messages with ``get``."""

    def __init__(self, client: EtcdClient, start: int, idle: float) -> None:
        self.client = client
        self.start = start
        self._queue: queue.Queue[Message] = queue.Queue(QUEUE_SIZE)
        self._closed = threading.Event()
        self._response: requests.Response | None = None
        body = {
            "create_request": {
                "key": b64(ALL_KEYS),
                "range_end": b64(ALL_KEYS),
                "start_revision": start,
                "prev_kv": True,
            }
        }
        self._thread = threading.Thread(target=self._read, args=(body, idle), name="drtool-etcd-watch", daemon=True)
        self._thread.start()

    def _read(self, body: dict[str, Any], idle: float) -> None:
        try:
            self._response = self.client.open_stream(PATH, body, read_timeout=idle)
            for line in self._response.iter_lines(chunk_size=64 * 1024, delimiter=b"\n"):
                if self._closed.is_set():
                    return
                if line.strip():
                    self._put(Message(stream_result(self.client.endpoint, line, PATH), now_text()))
            self._put(Message(None, now_text(), "the watch stream ended"))
        except SourceError as exc:
            self._put(Message(None, now_text(), exc.message))
        except (requests.exceptions.RequestException, OSError, ValueError) as exc:
            self._put(Message(None, now_text(), f"the watch stream broke: {_reason(exc)}"))
        except AttributeError:
            # ``close`` closed the response under this read: urllib3 then reads from a file it has dropped
            if not self._closed.is_set():
                raise

    def _put(self, message: Message) -> None:
        """Block while the follower is busy (backpressure), but never after ``close``."""
        while not self._closed.is_set():
            try:
                self._queue.put(message, timeout=0.2)
                return
            except queue.Full:
                continue

    def get(self, timeout: float) -> Message | None:
        try:
            return self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def close(self) -> None:
        self._closed.set()
        if self._response is not None:
            with contextlib.suppress(Exception):
                self._response.close()
        self._thread.join(timeout=5)
