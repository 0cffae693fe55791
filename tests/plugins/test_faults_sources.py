"""Sources failing inside one backup of several plugins (etcd + kubernetes + files, plus MLflow and a registry).

Each drill breaks one source for real — an etcd that was running and is stopped, a kube-apiserver behind a
TLS fault proxy answering 429/503 or dropping the connection mid-list, an MLflow and a registry that are not
there — and checks what the operator sees: exit 8 with one line naming the plugin and the reason, the
other plugins' artifacts committed and readable (`check --read-data`), the backup `partial`, never
`complete`, and `drtool show` / `list` telling why. Throttling that clears up is retried (honouring
Retry-After) and the backup completes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.etcd_seed import settings_of

from drtool.servers import process
from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import Cli
from tests.fixtures.faults import KubeFaultProxy, start_kube_fault_proxy
from tests.fixtures.kube import KubeLab


@pytest.fixture
def kube_faults(kube_source: KubeLab, tmp_path: Path) -> Iterator[KubeFaultProxy]:
    via = start_kube_fault_proxy(kube_source.apiserver, tmp_path)
    yield via
    via.proxy.stop()


@pytest.fixture
def files_source(tmp_path: Path) -> dict[str, Any]:
    src = tmp_path / "pki"
    src.mkdir()
    (src / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nnot secret\n-----END CERTIFICATE-----\n")
    (src / "sa.pub").write_bytes(b"public half " * 100)
    return {"paths": [str(src)]}


def _dead_url() -> str:
    """A loopback address where nothing listens: the service is down (connection refused)."""
    return f"http://127.0.0.1:{process.free_port()}"


def _backup(cli: Cli, tmp_path: Path, sources: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Init a fresh store, back up every configured source at DEBUG; return the process and `show --json`."""
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"sources": dict(sources)}))
    store = tmp_path / "store"
    cli("init", "--store", str(store), check=True)
    plugins = [arg for name in sources for arg in ("-p", name)]
    proc = cli("--log-level", "debug", "backup", *plugins)
    ids = [p.name for p in (store / "manifests").iterdir()] if (store / "manifests").is_dir() else []
    assert len(ids) == 1, (ids, proc.stderr[-2000:])
    shown = json.loads(cli("show", "latest", "--json", check=True).stdout)
    return proc, shown


def _error_line(stderr: str) -> str:
    """The CLI's one error line; everything before it on stderr must be DEBUG/INFO/WARNING log records."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("drtool: error: "), stderr[-3000:]
    assert all(re.match(r"\d{4}-\d\d-\d\d [\d:,]+ (DEBUG|INFO|WARNING) ", line) for line in lines[:-1]), stderr[-3000:]
    return lines[-1]


def _assert_partial(cli: Cli, proc: Any, shown: dict[str, Any], failed: Mapping[str, str]) -> None:
    """Exit 8, one error line naming each failed plugin and its reason; the others complete and readable."""
    assert proc.returncode == 8, (proc.returncode, proc.stderr[-3000:])
    error = _error_line(proc.stderr)
    print(f"\n{error}")
    assert "is partial" in error, error
    for name, reason in failed.items():
        assert f"{name}: " in error and reason in error, (name, reason, error)
    assert shown["status"] == "partial"
    for name, outcome in shown["plugins"].items():
        if name in failed:
            assert outcome["status"] == "failed" and failed[name] in outcome["error"], (name, outcome)
        else:
            assert outcome["status"] == "ok", (name, outcome)
    holding = {a["plugin"] for a in shown["artifacts"]}
    assert holding == set(shown["plugins"]) - set(failed), holding  # a failed plugin leaves no artifact
    text = cli("show", "latest", check=True).stdout
    for name, reason in failed.items():
        assert f"plugin {name}: failed" in text and reason in text, text
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert [b["status"] for b in listed] == ["partial"]
    report = json.loads(cli("check", "--read-data", "--json", check=True).stdout)
    assert report["ok"], report  # what the other plugins wrote is all there and intact


def _sources(etcd: Mapping[str, Any], kubeconfig: str, files: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    return {"etcd": dict(etcd), "files": dict(files), "kubernetes": {"kubeconfig": kubeconfig, **more}}


def test_etcd_stopped_makes_only_etcd_fail(
    cli: Cli, tmp_path: Path, etcd_scratch: EtcdServer, kube_source: KubeLab, files_source: dict[str, Any]
) -> None:
    settings = settings_of(etcd_scratch)
    etcd_scratch.stop()  # it was up a moment ago: now down, as in an outage
    proc, shown = _backup(cli, tmp_path, _sources(settings, kube_source.readonly_kubeconfig, files_source))
    _assert_partial(cli, proc, shown, {"etcd": "etcd"})
    assert "plugin etcd failed" in proc.stderr  # the warning log record, before the error line


@pytest.mark.parametrize("status", [429, 503])
def test_api_server_throttling_is_retried_honouring_retry_after(
    cli: Cli,
    tmp_path: Path,
    etcd_source: EtcdServer,
    kube_faults: KubeFaultProxy,
    files_source: dict[str, Any],
    status: int,
) -> None:
    # every LIST of ConfigMaps is refused twice with Retry-After: 1, then answered by the real server
    kube_faults.proxy.configure(match="configmaps", per_request=2, error_status=status, retry_after=1)
    started = time.monotonic()
    proc, shown = _backup(cli, tmp_path, _sources(settings_of(etcd_source), kube_faults.kubeconfig, files_source))
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shown["status"] == "complete"
    assert kube_faults.proxy.injected >= 2, kube_faults.proxy.injected
    assert f": {status}, retrying in 1.0 s (attempt 1)" in proc.stderr
    assert f": {status}, retrying in 1.0 s (attempt 2)" in proc.stderr
    assert took >= 2.0  # the two Retry-After waits were honoured, not skipped
    assert any("configmaps" in a["name"] for a in shown["artifacts"] if a["plugin"] == "kubernetes")


def test_api_server_503_that_persists_fails_kubernetes_cleanly(
    cli: Cli,
    tmp_path: Path,
    etcd_source: EtcdServer,
    kube_faults: KubeFaultProxy,
    files_source: dict[str, Any],
) -> None:
    kube_faults.proxy.configure(match="secrets", error_rate=1.0, error_status=503)
    started = time.monotonic()
    proc, shown = _backup(cli, tmp_path, _sources(settings_of(etcd_source), kube_faults.kubeconfig, files_source))
    took = time.monotonic() - started
    _assert_partial(cli, proc, shown, {"kubernetes": "503 ServiceUnavailable: injected by FaultProxy"})
    assert "secrets" in shown["plugins"]["kubernetes"]["error"]
    assert kube_faults.proxy.injected >= 6  # the first try and 5 retries
    assert took < 90, took  # bounded: the retries give up rather than hang


def test_api_server_going_away_mid_list(
    cli: Cli,
    tmp_path: Path,
    etcd_source: EtcdServer,
    kube_faults: KubeFaultProxy,
    files_source: dict[str, Any],
) -> None:
    # small pages so lists have continue tokens; every follow-up page finds the connection closed
    kube_faults.proxy.configure(match="continue=", error_rate=1.0, error_status=0)
    sources = _sources(settings_of(etcd_source), kube_faults.kubeconfig, files_source, page_size=20)
    proc, shown = _backup(cli, tmp_path, sources)
    _assert_partial(cli, proc, shown, {"kubernetes": "connection closed by the server"})
    assert "page(s): the list is incomplete" in shown["plugins"]["kubernetes"]["error"]
    assert kube_faults.proxy.injected >= 3  # the first try and the connection retries


def test_mlflow_and_registry_down_fail_their_plugins_only(
    cli: Cli, tmp_path: Path, etcd_source: EtcdServer, kube_source: KubeLab, files_source: dict[str, Any]
) -> None:
    registry = _dead_url().removeprefix("http://")
    sources = _sources(settings_of(etcd_source), kube_source.readonly_kubeconfig, files_source)
    sources["model-registry"] = {"url": _dead_url()}
    sources["images"] = {"images": [f"{registry}/team/trainer:v1"], "plain_http": True}
    proc, shown = _backup(cli, tmp_path, sources)
    _assert_partial(cli, proc, shown, {"model-registry": "127.0.0.1", "images": registry})
