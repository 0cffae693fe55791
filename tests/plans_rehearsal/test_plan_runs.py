"""Plan runs as an operator lives them, through the `drtool` command: approval gates that stop a run (and a
prompt that refuses by default), timeouts that kill a step's processes before its retry, the live view and
`drtool runs show`, and webhook notifications received by a real HTTP server.

The steps restore real things: the ``files`` plugin into folders read back afterwards, and a test plugin
(``tests/data/step_plugins``, installed for the child `drtool` through a temporary distribution) that writes
into a lab etcd until it is killed.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
from drtool.servers.etcd import EtcdServer
from tests.fixtures.core import PASSPHRASE, Cli, assert_clean_error

STEP_PLUGINS = Path(__file__).parents[1] / "data" / "step_plugins" / "drtool_test_steps.py"


def _load_step_plugins() -> Any:
    spec = importlib.util.spec_from_file_location("drtool_test_steps", STEP_PLUGINS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


step_plugins = _load_step_plugins()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder on PYTHONPATH holding the test plugin as an installed distribution (its entry point)."""
    root = tmp_path_factory.mktemp("site")
    shutil.copy(STEP_PLUGINS, root / STEP_PLUGINS.name)
    info = root / "drtool_test_steps-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: drtool-test-steps\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[drtool.plugins]\nwriter = drtool_test_steps:WriterPlugin\n")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    """A store with one backup of a folder (``files``) and of the test plugin (``writer``)."""
    root = tmp_path_factory.mktemp("runs")
    source = root / "source"
    source.mkdir()
    (source / "ca.crt").write_text("the cluster CA\n")
    repo = Repository.init(LocalBackend(root / "store"), passphrase=PASSPHRASE)
    plugins = [get_plugin("files"), step_plugins.WriterPlugin()]
    manifest = run_backup(repo, plugins, {"files": {"paths": [str(source)]}})
    assert manifest.status == "complete"
    return repo


@pytest.fixture
def run_cli(cli: Cli, site: Path, store: Repository) -> Cli:
    cli.env["PYTHONPATH"] = os.pathsep.join([str(site), cli.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cli.env["DRTOOL_STORE"] = store.backend.url
    return cli


def files_step(step_id: str, into: Path, *, needs: str = "", approval: bool = False) -> str:
    return (
        f"  - id: {step_id}\n    uses: files\n    needs: [{needs}]\n    approval: {str(approval).lower()}\n"
        f"    target: {{path: '{into / step_id}'}}\n"
    )


def write_plan(tmp_path: Path, steps: str, extra: str = "") -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(f"name: gated\nparallelism: 2\n{extra}steps:\n{steps}")
    return path


def restored(into: Path, step_id: str) -> str | None:
    """What a files step restored (the folder's file, read back), or None when nothing was restored."""
    found = list((into / step_id).rglob("ca.crt")) if (into / step_id).exists() else []
    return found[0].read_text() if found else None


def run_id_in(text: str) -> str:
    match = re.search(r"run-\d{8}T\d{6}Z-[0-9a-f]{6}", text)
    assert match, text
    return match.group(0)


def test_a_gated_step_stops_a_run_without_a_terminal_and_resumes_after_approve(run_cli: Cli, tmp_path: Path) -> None:
    into = tmp_path / "restored"
    steps = (
        files_step("keys", into, approval=True) + files_step("other", into) + files_step("after", into, needs="keys")
    )
    plan = write_plan(tmp_path, steps)
    proc = run_cli("restore", "--plan", str(plan))
    assert_clean_error(proc, 11, "stopped before step(s) keys: approval needed", "--approve keys`")
    run_id = run_id_in(proc.stderr)
    assert f"drtool restore --resume {run_id} --approve keys" in proc.stderr
    # the step that does not need the gated one ran; the gated one and what needs it did not
    assert restored(into, "other") == "the cluster CA\n"
    assert restored(into, "keys") is None and restored(into, "after") is None
    assert "not run: needs keys, which awaits approval" in proc.stdout and "▶ other (files)" in proc.stdout
    shown = json.loads(run_cli("runs", "show", run_id, "--json", check=True).stdout)
    assert shown["run"]["status"] == "awaiting-approval" and shown["approvals"] == []
    assert {s["step"]: s["status"] for s in shown["steps"]} == {
        "keys": "awaiting-approval",
        "other": "ok",
        "after": "skipped",
    }
    assert shown["continue_with"] == f"drtool restore --resume {run_id} --approve keys"
    assert_clean_error(run_cli("restore", "--resume", run_id, "--approve", "other"), 2, "that step needs no approval")
    assert_clean_error(run_cli("restore", "--resume", run_id, "--approve", "nope"), 2, "has no such step")

    resumed = run_cli("restore", "--resume", run_id, "--approve", "keys", "--approver", "alice", "--json")
    assert resumed.returncode == 0, resumed.stderr
    steps_after = {s["id"]: s for s in json.loads(resumed.stdout)["steps"]}
    assert steps_after["other"]["summary"] == f"done in run {run_id}"
    assert steps_after["keys"]["status"] == steps_after["after"]["status"] == "ok"
    approval = steps_after["keys"]["approval"]
    assert approval["approver"] == "alice" and approval["how"] == "--approve" and approval["approved"]
    assert restored(into, "keys") == restored(into, "after") == "the cluster CA\n"
    new_run = json.loads(resumed.stdout)["run"]
    rows = RunLog(Catalog(run_cli.env["DRTOOL_CATALOG"])).approvals(new_run)
    assert [(r.step_id, r.approved, r.approver, r.how) for r in rows] == [("keys", True, "alice", "--approve")]
    assert rows[0].os_user and rows[0].host == os.uname().nodename and rows[0].at.endswith("Z")

    everything = run_cli("restore", "--plan", str(plan), "--approve-all", "--json")
    assert everything.returncode == 0, everything.stderr
    assert json.loads(everything.stdout)["steps"][0]["approval"]["how"] == "--approve-all"


def drive(argv: list[str], env: dict[str, str], answer: str, before_answer: Callable[[], bool]) -> tuple[int, str]:
    """Run ``drtool`` on a pseudo-terminal: wait for its approval prompt and ``before_answer``, then answer."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "drtool", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm", "COLUMNS": "160"},
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def pump(until: Callable[[], bool], timeout: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # the terminal closed with the process
                    return

    try:
        pump(lambda: b"[y/N]" in seen and before_answer(), 60)
        assert b"[y/N]" in seen, seen.decode(errors="replace")
        os.write(master, answer.encode() + b"\r")
        pump(lambda: proc.poll() is not None, 60)
        return proc.wait(10), re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_the_prompt_on_a_terminal_names_the_change_and_refuses_by_default(
    run_cli: Cli, etcd_scratch: EtcdServer, tmp_path: Path
) -> None:
    into = tmp_path / "restored"
    writer = f"  - id: writer\n    uses: writer\n    target: {{etcd: '{etcd_scratch.client_url}', prefix: /tty}}\n"
    plan = write_plan(tmp_path, files_step("dns", into, approval=True) + files_step("other", into) + writer)
    argv = ["restore", "--plan", str(plan)]
    # while the question waits, the step that does not need the gated one runs to its end
    code, screen = drive(argv, run_cli.env, "", lambda: restored(into, "other") is not None)
    assert code == 11, screen
    assert "Step dns (plugin files) needs approval before it runs." in screen
    assert "It will restore 1 artifact(s)" in screen and "into its target (path)" in screen
    assert "Approve step dns? [y/N]" in screen
    assert restored(into, "dns") is None and restored(into, "other") == "the cluster CA\n"
    run_id = run_id_in(screen)
    rows = RunLog(Catalog(run_cli.env["DRTOOL_CATALOG"])).approvals(run_id)
    assert [(r.step_id, r.approved, r.how) for r in rows] == [("dns", False, "prompt")]
    assert "drtool restore --resume" in screen and "--approve dns" in screen

    code, screen = drive(argv, run_cli.env, "y", lambda: True)
    assert code == 0, screen
    assert restored(into, "dns") == "the cluster CA\n"
    # the table shows what each step's process reported of its progress
    assert re.search(r"│ writer +│ writer +│ ok +│.*│ 3\.0 MiB / 3\.0 MiB +│", screen), screen
    rows = RunLog(Catalog(run_cli.env["DRTOOL_CATALOG"])).approvals(run_id_in(screen))
    assert [(r.step_id, r.approved, r.how) for r in rows] == [("dns", True, "prompt")]


def etcd_keys(server: EtcdServer, prefix: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """The etcd revision now and every key under ``prefix`` with its value and revisions (read with requests)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = {"key": base64.b64encode(prefix.encode()).decode(), "range_end": base64.b64encode(end.encode()).decode()}
    answer = requests.post(f"{server.client_url}/v3/kv/range", json=body, timeout=10).json()
    keys = {
        base64.b64decode(kv["key"]).decode(): {
            "value": base64.b64decode(kv.get("value", "")).decode(),
            "created": int(kv["create_revision"]),
            "modified": int(kv["mod_revision"]),
        }
        for kv in answer.get("kvs", [])
    }
    return int(answer["header"]["revision"]), keys


def test_a_timed_out_step_is_killed_with_its_processes_before_the_retry(
    run_cli: Cli, etcd_scratch: EtcdServer, tmp_path: Path
) -> None:
    prefix = "/drill/"
    plan = write_plan(
        tmp_path,
        "  - id: writer\n    uses: writer\n    timeout: 8s\n    retries: 1\n    with: {hang_attempts: 1}\n"
        f"    target: {{etcd: '{etcd_scratch.client_url}', prefix: '{prefix[:-1]}'}}\n",
    )
    running = run_cli.popen("restore", "--plan", str(plan), "--json")
    try:
        # `drtool runs show` follows the run from another process while it runs
        deadline = time.monotonic() + 120
        shown: dict[str, Any] = {}
        while time.monotonic() < deadline and not shown.get("steps", [{}])[0].get("seconds"):
            listed = json.loads(run_cli("runs", "list", "--json", check=True).stdout)
            if listed:
                shown = json.loads(run_cli("runs", "show", listed[0]["id"], "--json", check=True).stdout)
        assert shown["run"]["status"] == "running" and shown["steps"][0]["status"] == "running", shown
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 0, err
    step = json.loads(out)["steps"][0]
    assert step["status"] == "ok" and step["attempts"] == 2 and step["summary"] == "attempt 2 returned"
    revision, keys = etcd_keys(etcd_scratch, prefix)
    # the retry found no process of the first attempt (the step's, or the helper it started) still running
    assert json.loads(keys["/drill/alive-at-start/2"]["value"]) == []
    first_writes = [k for k in keys if k.startswith("/drill/w/1/")]
    assert {k.split("/")[4] for k in first_writes} == {"step", "helper"} and len(first_writes) > 20
    retry_began = keys["/drill/alive-at-start/2"]["created"]
    assert max(keys[k]["modified"] for k in first_writes) < retry_began  # never two writers at once
    assert not [k for k in keys if k.startswith("/drill/w/2/")]
    pids = json.loads(keys["/drill/pids"]["value"])
    assert len(pids) == 4 and not [p for p in pids if step_plugins.running(p)]
    time.sleep(1.0)  # nothing of either attempt writes any more
    assert etcd_keys(etcd_scratch, prefix)[0] == revision
    # the step's process was handed the key through a pipe: no credential in its environment or argv
    for attempt in ("1", "2"):
        seen = json.loads(keys[f"/drill/seen/{attempt}"]["value"])
        assert PASSPHRASE not in seen["environ"] and "DRTOOL_PASSPHRASE" not in seen["environ"]
        assert PASSPHRASE not in seen["cmdline"] and "drtool.plans.step_main" in seen["cmdline"]


class Receiver:
    """A real HTTP server on loopback that records every POSTed JSON body, in order."""

    def __init__(self) -> None:
        events: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                events.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.events = events
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_the_webhook_receives_the_documented_events_in_order(run_cli: Cli, receiver: Receiver, tmp_path: Path) -> None:
    into = tmp_path / "restored"
    steps = (
        files_step("dns", into, approval=True)
        + "  - id: broken\n    uses: writer\n    with: {fail: true}\n    target: {etcd: x, prefix: y}\n"
        + files_step("fine", into, needs="broken")
    )
    extra = "objectives: {rto: 1h}\nvariables: {HOOK: receiver URL}\nnotify: {webhook: '${HOOK}'}\n"
    plan = write_plan(tmp_path, steps, extra=extra)
    allow = {"DRTOOL_VAR_HOOK": receiver.url, "DRTOOL_WEBHOOK_ALLOW": receiver.url}  # the operator allows it
    proc = run_cli("restore", "--plan", str(plan), env=allow)
    assert_clean_error(proc, 7, "step(s) broken failed", "--approve dns")
    run_id = run_id_in(proc.stderr)
    names = [(e["event"], (e.get("step") or {}).get("id")) for e in receiver.events]
    assert names == [
        ("run.started", None),
        ("approval.needed", "dns"),
        ("step.failed", "broken"),
        ("run.finished", None),
    ]
    started, needed, failed, finished = receiver.events
    assert started["severity"] == "info" and started["rto"]["so_far_s"] < 60
    assert all(e["version"] == 1 and e["run"]["id"] == run_id and e["run"]["plan"] == "gated" for e in receiver.events)
    assert needed["continue_with"] == f"drtool restore --resume {run_id} --approve dns"
    assert "error" not in failed["step"] and failed["severity"] == "error"  # ids and statuses only
    assert finished["status"] == "failed" and finished["steps"] == {"dns": "awaiting-approval", "broken": "failed",
                                                                   "fine": "skipped"}  # fmt: skip
    so_far = [e["rto"]["so_far_s"] for e in receiver.events]
    assert so_far == sorted(so_far) and finished["rto"]["objective_s"] == 3600
    assert "step broken failed" in failed["text"] and "RTO so far" in failed["text"]
    bodies = json.dumps(receiver.events)
    assert PASSPHRASE not in bodies and receiver.url not in bodies and str(into) not in bodies
    # DRTOOL_WEBHOOK overrides the plan's; a resume's RTO counts from the first run's start
    resumed = run_cli("restore", "--resume", run_id, "--approve-all", env={"DRTOOL_WEBHOOK": receiver.url})
    assert resumed.returncode == 7
    again = receiver.events[4:]
    assert [e["event"] for e in again] == ["run.started", "step.failed", "run.finished"]
    assert again[0]["run"]["resumed_from"] == run_id and again[0]["rto"]["so_far_s"] >= finished["rto"]["so_far_s"]


def test_a_step_dies_with_drtool(run_cli: Cli, etcd_scratch: EtcdServer, tmp_path: Path) -> None:
    """drtool killed outright (no chance to clean up): its step's process sees its stdin close and kills its
    own group, so nothing of the step writes on into the target."""
    plan = write_plan(
        tmp_path,
        "  - id: writer\n    uses: writer\n    with: {hang_attempts: 9}\n"
        f"    target: {{etcd: '{etcd_scratch.client_url}', prefix: '/orphan'}}\n",
    )
    running = run_cli.popen("restore", "--plan", str(plan))
    try:
        deadline = time.monotonic() + 120  # a step process and its helper start slowly under load
        while time.monotonic() < deadline and len(etcd_keys(etcd_scratch, "/orphan/w/")[1]) < 10:
            time.sleep(0.2)
    finally:
        running.kill()
        running.communicate(timeout=30)
    pids = json.loads(etcd_keys(etcd_scratch, "/orphan/pids")[1]["/orphan/pids"]["value"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [p for p in pids if step_plugins.running(p)]:
        time.sleep(0.1)
    assert len(pids) == 2 and not [p for p in pids if step_plugins.running(p)]
    revision = etcd_keys(etcd_scratch, "/orphan/")[0]
    time.sleep(1.0)
    assert etcd_keys(etcd_scratch, "/orphan/")[0] == revision
