"""A plugin for tests/plans_rehearsal/test_plan_runs.py, installed for the `drtool` it starts through a temporary
distribution.

``writer`` restores by writing into a real etcd (its JSON gateway) until it is killed, as a step that hangs
in a disaster would: each attempt first notes which processes of earlier attempts still run, starts a helper
in its own process group that writes too, records both pids, and writes what its own environment and command
line hold (the store's passphrase must not be there). The first ``hang_attempts`` attempts write forever;
a later one reports its progress and returns at once. With ``fail: true`` it fails at once without
touching anything.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool.errors import SourceError
from drtool.plugin.contract import BackupContext, BasePlugin, Check, RestoreContext, RestoreResult

WRITE_EVERY_S = 0.05
PAYLOAD_BYTES = 3 << 20


class Etcd:
    """Just enough of etcd's v3 JSON gateway."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def put(self, key: str, value: str) -> None:
        self.call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})

    def get(self, key: str) -> str | None:
        kvs = self.call("/v3/kv/range", {"key": _b64(key)}).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def running(pid: int) -> bool:
    """Still running (a zombie has stopped; only its exit status waits to be collected)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def write_forever(etcd: Etcd, prefix: str, attempt: int, who: str) -> None:
    n = 0
    while True:
        etcd.put(f"{prefix}/w/{attempt}/{who}/{n:06d}", str(time.time()))
        n += 1
        time.sleep(WRITE_EVERY_S)


class WriterPlugin(BasePlugin):
    name = "writer"
    description = "test plugin: writes into etcd until it is killed"

    def backup(self, source: Mapping[str, Any], ctx: BackupContext) -> Mapping[str, Any]:
        with ctx.artifact("payload") as sink:
            sink.write(b"payload" * 100)
        return {}

    def restore(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> RestoreResult:
        if options.get("fail"):
            raise SourceError("writer: told to fail", "this is a test")
        etcd, prefix = Etcd(str(target["etcd"])), str(target["prefix"])
        attempt = int(etcd.get(f"{prefix}/attempts") or 0) + 1
        etcd.put(f"{prefix}/attempts", str(attempt))
        earlier = json.loads(etcd.get(f"{prefix}/pids") or "[]")
        etcd.put(f"{prefix}/alive-at-start/{attempt}", json.dumps([p for p in earlier if running(p)]))
        own = {"environ": Path("/proc/self/environ").read_bytes().decode(errors="replace"),
               "cmdline": Path("/proc/self/cmdline").read_bytes().decode(errors="replace")}  # fmt: skip
        etcd.put(f"{prefix}/seen/{attempt}", json.dumps(own))
        helper = subprocess.Popen([sys.executable, __file__, etcd.url, prefix, str(attempt)])
        etcd.put(f"{prefix}/pids", json.dumps([*earlier, os.getpid(), helper.pid]))
        if attempt > int(options.get("hang_attempts", 0)):
            helper.kill()
            helper.wait()
            task = ctx.progress("payload", PAYLOAD_BYTES)  # what the live view shows for the step
            task.advance(PAYLOAD_BYTES)
            task.done()
            return RestoreResult(True, f"attempt {attempt} returned")
        write_forever(etcd, prefix, attempt, "step")
        raise AssertionError("unreachable")

    def verify(self, ctx: RestoreContext, target: Mapping[str, Any], options: Mapping[str, Any]) -> list[Check]:
        return [Check("writer", True, "returned")]


if __name__ == "__main__":  # the helper an attempt starts: it writes as long as its process group lives
    write_forever(Etcd(sys.argv[1]), sys.argv[2], int(sys.argv[3]), "helper")
