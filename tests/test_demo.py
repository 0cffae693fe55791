"""The README's first command, run as a newcomer would (smaller), must tell the whole story and pass."""

from __future__ import annotations

import json
from pathlib import Path

from drtool.lab.process import alive
from tests.fixtures.core import Cli


def test_demo_backs_up_and_restores_a_real_etcd(cli: Cli, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    proc = cli("demo", "--keys", "3000", "--workdir", str(workdir), env={"DRTOOL_PASSPHRASE": None})  # type: ignore[dict-item]
    assert proc.returncode == 0, proc.stderr
    assert "every key equals the source's" in proc.stdout and "FAILED" not in proc.stdout
    assert (workdir / "store" / "drtool-store.json").exists()
    passphrase = (workdir / "passphrase").read_text().strip()
    assert passphrase not in proc.stdout + proc.stderr
    # nothing is left running: both the source and the restored etcd were stopped
    states = [json.loads(p.read_text()) for p in workdir.glob("**/lab.json")]
    states += [json.loads(p.read_text()) for p in workdir.glob("**/*.drtool-restore.json")]
    pids = [c.get("pid") for s in states for c in s.get("components", {}).values()]
    pids += [s.get("server", {}).get("pid") for s in states if "server" in s]
    assert pids and not any(alive(p) for p in pids if p)
