"""`drtool demo` on a machine that lacks something, what it changes between its two rehearsals, and the pieces
it is made of. The whole demo, every plugin, from a fresh clone: tests/e2e/test_fresh_clone.py."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from drtool_lab.demo.followup import CUTOVER_VARIABLE, follow_up
from drtool_lab.doctor import Finding, with_requirements
from drtool_lab.obtain import debian_install_impossible, unavailable_kinds

from drtool import progress as progress_module
from drtool.plans.loader import load_plan, read_values
from drtool.progress import LineProgress
from drtool.servers.provision import Provision
from tests.fixtures.core import Cli, assert_clean_error

PLAN = Path(__file__).parents[2] / "restore-plans" / "full-cluster-rebuild.yaml"
VENV_BIN = str(Path(sys.executable).parent)
# the shell script that stands in for apt-get: installing Debian packages is what a test on a shared machine
# cannot do for real, so it records what it was asked and installs nothing
FAKE_APT_GET = """#!/bin/sh
echo "$*" >> "{log}"
"""


def _fake_apt_get(tmp_path: Path) -> tuple[Path, Path]:
    folder, log = tmp_path / "fake-apt", tmp_path / "apt.log"
    folder.mkdir()
    script = folder / "apt-get"
    script.write_text(FAKE_APT_GET.format(log=log))
    script.chmod(0o755)
    return folder, log


def test_no_install_refuses_before_anything_starts_and_names_the_command(cli: Cli, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    proc = cli("demo", "--no-install", "--workdir", str(workdir), "-p", "git", env={"PATH": VENV_BIN})
    assert_clean_error(proc, 6, "not installed: git (Debian git, for git)", "apt-get install git")
    assert not workdir.exists()


@pytest.mark.skipif(debian_install_impossible() is not None, reason="the demo installs packages as root on Debian only")
@pytest.mark.e2e  # the demo starts its lab
def test_what_cannot_be_had_is_left_out_and_the_rehearsal_skips_it_with_the_reason(cli: Cli, tmp_path: Path) -> None:
    """git and iproute2 are off PATH: the demo says it installs them, the (fake) apt-get does not, so git is
    left out; the plan's required cluster-objects step and its checks are skipped with their reasons. The images
    plugin is the one that still runs: a registry starts in seconds (the fresh-clone demo restores every plugin,
    the Vault trial restore among them)."""
    fake_apt, apt_log = _fake_apt_get(tmp_path)
    workdir = tmp_path / "demo"
    started = time.monotonic()
    proc = cli(
        "demo", "--workdir", str(workdir), "-p", "git", "-p", "images",
        env={"PATH": f"{fake_apt}:{VENV_BIN}", "DRTOOL_PASSPHRASE": None},  # type: ignore[dict-item]
        timeout=600,
    )  # fmt: skip
    print(f"demo with git left out and images: {time.monotonic() - started:.0f}s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    out = proc.stdout
    said = out.index("apt-get install git: git for git")
    assert out.index("installing from Debian") < said and "apt-get install iproute2: ip" in out
    assert apt_log.read_text().splitlines() == ["update -qq", "install -y -qq git iproute2"]
    assert "left out git: git: git is still missing after apt-get install git" in out
    report = json.loads(next((workdir / "reports").glob("rehearsal-*.json")).read_text())
    steps = {s["id"]: s for s in report["run"]["steps"]}
    assert steps["images"]["status"] == "ok"
    assert steps["git"]["status"] == steps["cluster-objects"]["status"] == "skipped"  # required, yet skipped
    assert "left out: git: git is still missing" in steps["git"]["summary"]
    assert "not chosen (drtool demo -p)" in steps["cluster-objects"]["summary"]
    cluster_checks = {"team-namespace", "gpu-quota", "first-workload-admitted", "services-serving"}
    cluster_checks |= {"certificates-kept", "owners-resolved"}  # every check that reads the cluster, platform ones too
    assert set(report["run"]["left_out"]["checks"]) == cluster_checks
    assert report["run"]["isolation"]["mode"] == "in-process"  # no `ip`: the rehearsal says why it guards less
    loop = (workdir / "reports" / "demo-loop.html").read_text()
    assert "DEMO PASSED" in loop and "git is still missing" in loop
    assert "drill matrix" in out  # the summary shows every scenario against its latest drill (the rehearsals')
    assert re.search(r"report: \S+demo-loop\.html", out.replace("\n", "")) and "open it: " in out


def _finding(status: str, address: str, purpose: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, "address": address, "purpose": purpose, "needed": True, "hint": "fix it", **extra}


def test_follow_up_repoints_each_old_balancer_and_waives_only_what_no_step_rewrites(tmp_path: Path) -> None:
    today = dt.date(2026, 12, 1)
    ingress_host = {"part": "ingress_hosts", "value": "asr.ml.example.com"}
    independence = {
        "findings": [
            _finding("inside", "203.0.113.10", "DNS record asr.ml.example.com. A 203.0.113.10 points at ..."),
            _finding("inside", "203.0.113.10", "DNS record grpc.ml.example.com. A 203.0.113.10 points at ..."),
            _finding("inside", "2001:db8::7", "DNS record v6.ml.example.com. AAAA 2001:db8::7 points at ..."),
            _finding("inside", "gw.lb.ml.example.com", "DNS record api.ml.example.com. CNAME gw.lb... points at"),
            _finding("inside", "asr.ml.example.com:443", "address carried (dns-record)", match=ingress_host),
            _finding("inside", "http://minio.velero.svc:9000", "address carried by restored state (spec)"),
            _finding("inside", "10.0.0.9", "a slot not used", needed=False),
            _finding("unknown", "docker.io", "container image registry"),
        ]
    }
    fix = follow_up(independence, PLAN, tmp_path / "followup", today)
    assert fix.cutover == {
        "203.0.113.10": "198.51.100.10",
        "2001:db8::7": "2001:db8:100::a",
        "gw.lb.ml.example.com": "gw.lb.recovered.example.net",
    }
    assert read_values(fix.values_path) == {
        CUTOVER_VARIABLE: "203.0.113.10=198.51.100.10,2001:db8::7=2001:db8:100::a,"
        "gw.lb.ml.example.com=gw.lb.recovered.example.net"
    }
    # the SRV target is an Ingress host whose record the cutover re-points: the analysis remediates it
    assert [w["match"] for w in fix.waivers] == ["http://minio.velero.svc:9000"]
    assert fix.waivers[0]["expires"] == dt.date(2026, 12, 31) and "a person must judge" in fix.waivers[0]["reason"]
    assert fix.plan_path == tmp_path / "followup" / PLAN.name
    assert "${DNS_CUTOVER:-}" in fix.plan_path.read_text()
    plan = load_plan(fix.plan_path, values=fix.values, env={}).require()
    dns = next(s for s in plan.steps if s.uses == "dns-certs")
    assert dns.with_["cutover"] == fix.values[CUTOVER_VARIABLE]
    assert [w.match for w in plan.waivers] == ["http://minio.velero.svc:9000"]
    assert yaml.safe_load(PLAN.read_text())["waivers"] == []  # the shipped plan is left as it was


def test_follow_up_without_other_findings_keeps_the_shipped_plan(tmp_path: Path) -> None:
    found = [_finding("inside", "203.0.113.20", "DNS record dash.ml.example.com. A 203.0.113.20 points at ...")]
    fix = follow_up({"findings": found}, PLAN, tmp_path, dt.date(2026, 12, 1))
    assert fix.plan_path == PLAN and fix.waivers == [] and fix.lines() == ["cutover 203.0.113.20 -> 198.51.100.10"]


def test_a_kind_is_unavailable_when_it_or_what_it_starts_first_cannot_run() -> None:
    def finding(kind: str, program: str) -> Finding:
        return Finding(kind, Provision(program, "go install", f"{program}@v1", "v1", None))

    findings = [finding("minio", "minio"), finding("mlflow", "mlflow"), finding("git", "git")]
    kinds = with_requirements(["mlflow", "git"])
    assert kinds == ["git", "minio", "mlflow"]
    missing = unavailable_kinds(kinds, findings, {"minio": "minio is built from x and needs Go"})
    assert missing == {
        "minio": "minio is built from x and needs Go",
        "mlflow": "it starts minio: minio is built from x and needs Go",
    }


def test_line_progress_says_which_stage_runs_for_how_long_and_how_far_its_tasks_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))  # "0s" under load
    lines: list[str] = []
    with LineProgress(lines.append, every=0.05) as progress, progress.stage("back up"):
        task = progress.task("etcd: snapshot", 200)
        task.advance(100)
        progress.task("vault: raft snapshot").advance(3)
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:  # the ticker's first line, however late it runs
            time.sleep(0.01)
        assert progress.line() == "  … back up: 0s; etcd: snapshot 50%; vault: raft snapshot 3"
        task.done()
        assert progress.line() == "  … back up: 0s; vault: raft snapshot 3"
    assert lines and all(line.startswith("  … back up: 0s") for line in lines)
    assert progress.line() is None
