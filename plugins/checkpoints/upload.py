"""Writing restored objects to S3: parts read straight into reused buffers and sent as they are.

s3transfer's ``upload_fileobj`` of a stream (what a restore used) read each part into bytes of its own,
wrapped them in file objects that urllib3 read 16 KiB at a time (65,536 Python calls and copies per GiB),
started a transfer manager with threads of its own for every object, and held up to 4 parts of 8 MiB per
object: 128 MiB with four objects at once. Here every object of one restore shares ``buffers`` part
buffers: a part is read from the artifact stream into a free buffer (``readinto``: the chunks are copied
once, into it), sent as it is by ``upload_part`` (one ``sendall``), and the buffer is reused once S3
acknowledged the part. An upload that fails (a chunk that does not authenticate, a target that refuses)
is aborted: S3 never shows a partial object.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from drtool.errors import SourceError

PART = 8 << 20  # bytes per part: MinIO and S3 take 8 MiB parts at full speed; fewer parts held than 16 MiB ones


def read_full(stream: IO[bytes] | Any, into: bytearray | memoryview) -> int:
    """Fill ``into`` from ``stream`` (``readinto`` where it has one); fewer bytes only at its end."""
    view = memoryview(into)
    got = 0
    readinto = getattr(stream, "readinto", None)
    while got < len(view):
        if readinto is not None:
            n = readinto(view[got:])
        else:
            data = stream.read(len(view) - got)
            n = len(data)
            view[got : got + n] = data
        if not n:
            break
        got += n
    return got


class PartUploader:
    """Multipart uploads of one S3 location's restores: ``buffers`` part buffers of ``PART`` bytes shared by
    every object written at once, and as many threads sending them."""

    def __init__(self, client: Any, bucket: str, buffers: int) -> None:
        self._client = client
        self._bucket = bucket
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._spare = buffers  # buffers not allocated yet: made on first use
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(buffers, thread_name_prefix="ckpt-part")

    def _buffer(self) -> bytearray:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self._spare > 0
            self._spare -= make
        return bytearray(PART) if make else self._free.get()

    def upload(self, key: str, stream: IO[bytes] | Any, size: int, metadata: dict[str, str]) -> None:
        """Write ``size`` bytes of ``stream`` as ``key``; nothing is visible unless all of it was written,
        and the stream is read once past ``size`` first (where an artifact reader checks its end)."""
        if size < PART:
            body = bytearray(size)
            got = read_full(stream, body)
            stream.read(1)
            if got != size:
                raise _short(key, got, size)
            self._client.put_object(Bucket=self._bucket, Key=key, Body=body, Metadata=metadata)
            return
        upload_id = self._client.create_multipart_upload(Bucket=self._bucket, Key=key, Metadata=metadata)["UploadId"]
        parts: list[tuple[Future[dict[str, Any]], bytearray]] = []
        try:
            done = 0
            while done < size:
                buffer = self._buffer()
                try:
                    got = read_full(stream, memoryview(buffer)[: min(PART, size - done)])
                    if not got:
                        raise _short(key, done, size)
                    if done + got == size:
                        stream.read(1)  # the end: an artifact reader's last checks run before the upload completes
                except BaseException:
                    self._free.put(buffer)
                    raise
                done += got
                parts.append((self._pool.submit(self._part, key, upload_id, len(parts) + 1, buffer, got), buffer))
            etags = [{"PartNumber": i, "ETag": f.result()["ETag"]} for i, (f, _) in enumerate(parts, 1)]
            self._client.complete_multipart_upload(
                Bucket=self._bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": etags}
            )
        except BaseException:
            for f, buffer in parts:
                if f.cancel():
                    self._free.put(buffer)  # never sent: ``_part`` will not give it back
            for f, _ in parts:
                if not f.cancelled():
                    f.exception()  # wait: no part lands after the abort
            with contextlib.suppress(Exception):  # the error that stopped the upload is the one to surface
                self._client.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
            raise

    def _part(self, key: str, upload_id: str, number: int, buffer: bytearray, length: int) -> dict[str, Any]:
        try:
            body = buffer if length == len(buffer) else buffer[:length]  # the last part: a copy of its length
            return dict(
                self._client.upload_part(Bucket=self._bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body)
            )
        finally:
            self._free.put(buffer)


def _short(key: str, got: int, size: int) -> SourceError:
    return SourceError(f"checkpoints: the stream for {key} ended after {got} of {size} bytes; nothing was written")
