"""Two schedulers (two processes, two "machines") and a prune loop racing on one MinIO store.

Each scheduler backs up every second and prunes its own set after each run; a third process prunes the
whole store in a loop. Afterwards no backup that retention keeps is lost, every survivor reads back
intact (artifact length and SHA-256), and `drtool check --read-data` is clean.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from drtool.backends import open_backend
from drtool.crypto.credentials import Credentials
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext
from tests.fixtures.core import PASSPHRASE, Cli
from tests.fixtures.noise import noise

RUNS = 10  # per scheduler; each run ends with a prune of its set
SETS = ("alpha", "beta")


def machine(root: Path, name: str, store: str, env: dict[str, str]) -> tuple[Cli, Path]:
    home = root / name
    home.mkdir()
    cli = Cli(home)
    cli.env.update(env)
    data = root / f"data-{name}"
    data.mkdir()
    sets = {s: {"plugins": ["files"], "interval": "1s", "retention": {"keep_last": 2}} for s in SETS}
    sets = {s: body | {"sources": {"files": {"paths": [str(root / f"data-{s}")]}}} for s, body in sets.items()}
    config = {"store": store, "backup_sets": {name: sets[name]} if name in SETS else sets}
    path = home / ".config" / "drtool" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(config))
    return cli, data


def churn(folders: list[Path], stop: threading.Event) -> None:
    """New content every 0.2 s (written aside, then renamed: a reader sees a whole file), so prune has garbage."""
    seeds = itertools.count(1)
    while not stop.is_set():
        for folder in folders:
            tmp = folder / ".new"
            tmp.write_bytes(noise(64_000, next(seeds)))
            os.replace(tmp, folder / "payload.bin")
        stop.wait(0.2)


def test_two_schedulers_and_a_prune_race_on_one_minio_store(s3_store_url: str, minio_env: dict, tmp_path: Path) -> None:
    clis = {}
    folders = []
    for name in (*SETS, "pruner"):
        clis[name], data = machine(tmp_path, name, s3_store_url, minio_env)
        folders.append(data)
    clis["alpha"]("init", "--store", s3_store_url, "--no-save", check=True)
    stop = threading.Event()
    for folder in folders[:2]:
        (folder / "payload.bin").write_bytes(noise(64_000))
    churner = threading.Thread(target=churn, args=(folders[:2], stop), daemon=True)
    churner.start()
    args = ["-m", "drtool", "schedule", "run", "--metrics-address", "", "--max-runs", str(RUNS)]
    schedulers = {
        s: subprocess.Popen([sys.executable, *args], env=clis[s].env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for s in SETS
    }
    prunes = []
    try:
        while any(p.poll() is None for p in schedulers.values()):
            pruned = clis["pruner"]("prune", "--json", "--wait", "120", timeout=300)
            assert pruned.returncode == 0, pruned.stderr
            prunes.append(json.loads(pruned.stdout))
        outputs = {s: p.communicate(timeout=60) for s, p in schedulers.items()}
    finally:
        stop.set()
        for p in schedulers.values():
            if p.poll() is None:
                p.kill()
    made: dict[str, list[str]] = {}
    for s, (out, err) in outputs.items():
        assert schedulers[s].returncode == 0, err
        made[s] = re.findall(rf"set {s}: ok (\d{{8}}T\d{{6}}Z-[0-9a-f]{{6}})", out.decode())
        assert len(made[s]) == RUNS, out.decode() + err.decode()
    deleted = sum(p["chunks_deleted"] for p in prunes)
    deleted += sum(int(n) for out, _ in outputs.values() for n in re.findall(r"backup\(s\), (\d+) chunk", out.decode()))
    assert prunes and deleted > 0  # the race really collected garbage while backups ran

    repo = Repository.open(open_backend(s3_store_url), Credentials(passphrase=PASSPHRASE))
    present = set(repo.backup_ids())
    for s in SETS:
        assert set(made[s][-2:]) <= present, (s, made[s], present)  # what retention keeps is never lost
        assert {b for b in present if repo.get_manifest(b).backup_set == s} == set(made[s][-2:])
    for backup_id in present:  # each survivor reads back whole: every chunk, length and SHA-256
        ctx = PluginRestoreContext(repo, repo.find_backup(backup_id), "files")
        with ctx.open("files.tar") as reader:
            while reader.read(1 << 20):
                pass
    checked = json.loads(clis["pruner"]("check", "--read-data", "--json", check=True).stdout)
    assert checked["ok"] and not checked["missing_chunks"] and not checked["damaged_chunks"], checked
    assert checked["backups"] == 4
    assert list(repo.backend.list("locks/")) == []
    started = time.monotonic()
    final = json.loads(clis["pruner"]("prune", "--json", check=True).stdout)
    assert final["forgotten"] == [] and time.monotonic() - started < 120
