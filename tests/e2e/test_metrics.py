"""Metrics: the HTTP endpoint serves valid Prometheus exposition format with real values after a run."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from drtool.backends import open_backend
from drtool.catalog import Catalog
from drtool.repo.repository import Repository
from drtool.scheduler.runner import SetRunner
from drtool.scheduler.sets import parse_backup_sets
from drtool.servers.process import free_port
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.noise import noise


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition text (parsed by prometheus_client's own parser: invalid text raises)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_endpoint_serves_real_values_after_a_run(s3_store_url: str, tmp_path: Path) -> None:
    repo = Repository.init(open_backend(s3_store_url), passphrase=PASSPHRASE)
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.bin").write_bytes(noise(300_000))
    sets = parse_backup_sets(
        {
            "nightly": {"plugins": ["files"], "interval": "1h", "rpo": "30m", "retention": {"keep_last": 1}},
            "broken": {"plugins": ["files"], "interval": "1h", "sources": {"files": {"paths": ["/nonexistent"]}}},
        },
        "test",
    )
    runner = SetRunner(repo, sets, {"files": {"paths": [str(data)]}}, catalog=Catalog(str(tmp_path / "c.db")))
    port = free_port()
    runner.metrics.serve(f"127.0.0.1:{port}")
    before = time.time()
    first = runner.run("nightly")
    second = runner.run("nightly")  # same data: everything deduplicated; prune forgets the first
    assert runner.run("broken").status == "failed"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    got = samples(text)
    nightly = (("set", "nightly"),)
    files = (("plugin", "files"), ("set", "nightly"))
    assert got[("drtool_backup_runs_total", (("result", "ok"), ("set", "nightly")))] == 2
    assert got[("drtool_backup_last_success_timestamp_seconds", nightly)] >= before
    assert got[("drtool_backup_read_bytes_total", nightly)] >= 2 * 300_000  # tar headers add a little
    assert first.backup_id not in repo.backup_ids()  # pruned after the second run (keep_last 1)
    assert got[("drtool_backup_stored_bytes_total", nightly)] > 300_000  # first run: all new (random data)
    assert got[("drtool_backup_chunks_deduplicated_total", nightly)] >= 1  # second run: nothing new
    assert got[("drtool_plugin_read_bytes", files)] >= 300_000
    assert got[("drtool_plugin_artifacts", files)] == 1
    assert got[("drtool_plugin_last_success_timestamp_seconds", files)] >= before
    assert 0 <= got[("drtool_rpo_age_seconds", nightly)] < 120
    assert got[("drtool_rpo_objective_seconds", nightly)] == 1800
    assert got[("drtool_prune_forgotten_backups_total", nightly)] == 1
    assert got[("drtool_backup_failures_total", (("reason", "SourceError"), ("set", "broken")))] == 1
    assert ("drtool_rpo_age_seconds", (("set", "broken"),)) not in got  # never succeeded: no age, alert on absent
    assert second.status == "ok" and second.backup_id in repo.backup_ids()


def test_textfile_is_valid_exposition(tmp_path: Path) -> None:
    repo = Repository.init(open_backend(str(tmp_path / "store")), passphrase=PASSPHRASE)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x" * 1000)
    sets = parse_backup_sets({"s": {"plugins": ["files"], "interval": "1h"}}, "test")
    runner = SetRunner(repo, sets, {"files": {"paths": [str(tmp_path / "d")]}})
    runner.run("s")
    path = tmp_path / "drtool.prom"
    runner.metrics.write_textfile(str(path))
    got = samples(path.read_text())
    assert got[("drtool_backup_runs_total", (("result", "ok"), ("set", "s")))] == 1
    assert got[("drtool_store_free_bytes", (("store", str(tmp_path / "store")),))] > 0
