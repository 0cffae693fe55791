"""Plan files: every way a plan can be wrong is reported with its line and a hint; shipped plans are valid."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from drtool.catalog import Catalog
from drtool.catalog.runs import RunLog
from drtool.errors import UsageError
from drtool.plans.dag import downstream, find_cycle, waves
from drtool.plans.loader import load_plan, read_values
from drtool.plans.validate import check_file
from drtool.plugin.manager import load_plugins
from tests.fixtures.core import Cli, assert_clean_error

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"
SHIPPED = sorted(PLANS.glob("*.yaml"))
HEAD = "apiVersion: drtool/v1\nkind: RestorePlan\nname: t\n"


def write(tmp_path: Path, body: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def problems(path: Path, env: dict[str, str] | None = None) -> list[tuple[int | None, str, str]]:
    loaded = check_file(path, load_plugins()) if env is None else load_plan(path, env=env)
    return [(p.line, p.severity, p.message + " | " + p.hint) for p in loaded.problems]


def test_the_four_shipped_plans_are_valid() -> None:
    assert {p.name for p in SHIPPED} >= {
        "full-cluster-rebuild.yaml",
        "control-plane-from-etcd.yaml",
        "kueue-quotas-only.yaml",
        "training-resume.yaml",
    }
    for path in SHIPPED:
        loaded = check_file(path, load_plugins())
        assert not loaded.errors, [p.render(path) for p in loaded.errors]
        assert loaded.require().objectives.rto is not None


INVALID = [
    ("steps:\n  - id: a\n    uses: etcd\n    bogus: 1\n", 7, "unknown field steps[0].bogus"),
    ("steps:\n  - id: a\n", 5, "missing field steps[0].uses"),
    ("steps:\n  - id: a\n    uses: etcd\n    timeout: soon\n", 7, "'soon' is not a duration"),
    ("steps:\n  - id: a\n    uses: etcd\n    retries: many\n", 7, "valid integer"),
    ("steps:\n  - id: Bad\n    uses: etcd\n", 5, "must be lowercase"),
    ("steps:\n  - id: a\n    uses: etcd\n    with:\n      password: hunter2\n", 8, "inline secret at password"),
    ("steps:\n  - id: a\n    uses: etcd\n  - id: a\n    uses: etcd\n", 7, "appears twice"),
    ("steps:\n  - id: a\n    uses: etcd\n    needs: [b]\n", 7, "needs 'b', which is no step"),
    ("steps:\n  - id: a\n    uses: etcd\n    needs: [a]\n", 7, "needs itself"),
    ("steps:\n  - id: a\n    uses: no-such-plugin\n", 6, "unknown plugin 'no-such-plugin'"),
    ("steps: []\n", 4, "at least 1 item"),
    ("steps:\n  - id: a\n    uses: etcd\n    uses: etcd\n", 7, "key 'uses' appears twice"),
    ("steps:\n  - id: a\n   uses: etcd\n", 6, "not valid YAML"),
    ("objectives: {rto: fast}\nsteps:\n  - id: a\n    uses: etcd\n", 4, "'fast' is not a duration"),
    ("source: {backup: {latest-before: yesterday}}\nsteps:\n  - id: a\n    uses: etcd\n", 4, "datetime"),
    ("steps:\n  - id: a\n    uses: etcd\nchecks:\n  - type: http\n    id: h\n", 8, "missing field checks[0].url"),
    ("steps:\n  - id: a\n    uses: etcd\nchecks:\n  - type: ping\n    id: h\n", 8, "checks[0]"),
    (
        "steps:\n  - id: a\n    uses: etcd\nwaivers:\n  - match: '*.svc'\n    reason: ok!\n    step: zz\n",
        10,
        "names step 'zz'",
    ),
]


@pytest.mark.parametrize(("body", "line", "fragment"), INVALID, ids=[f[2][:28] for f in INVALID])
def test_invalid_plans_name_line_and_hint(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    found = [p for p in problems(write(tmp_path, HEAD + body)) if p[1] == "error"]
    assert any(fragment in text for _, _, text in found), found
    assert line in [ln for ln, _, text in found if fragment in text], found
    with pytest.raises(UsageError):
        check_file(tmp_path / "plan.yaml", load_plugins()).require()


def test_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    body = "steps:\n  - {id: a, uses: etcd, needs: [c]}\n  - {id: b, uses: etcd, needs: [a]}\n"
    body += "  - {id: c, uses: etcd, needs: [b]}\n  - {id: d, uses: etcd}\n"
    found = problems(write(tmp_path, HEAD + body))
    assert [(ln, sev) for ln, sev, text in found if "cycle: a -> c -> b -> a" in text] == [(5, "error")]
    loaded = load_plan(tmp_path / "plan.yaml")
    assert find_cycle(loaded.require().steps) == ["a", "c", "b", "a"]


def test_optional_unknown_plugins_and_unset_variables_are_warnings(tmp_path: Path) -> None:
    body = "target:\n  kubernetes: {kubeconfig: '${NOPE_KUBECONFIG}'}\n"
    body += "steps:\n  - {id: a, uses: not-installed, optional: true}\n  - {id: b, uses: kubernetes}\n"
    body += "variables: {NOPE_KUBECONFIG: the target}\n"
    found = problems(write(tmp_path, HEAD + body))
    assert all(sev == "warning" for _, sev, _ in found), found
    assert (7, "warning") in [(ln, sev) for ln, sev, text in found if "not installed" in text]
    assert (5, "warning") in [(ln, sev) for ln, sev, text in found if "${NOPE_KUBECONFIG} is not set" in text]


def test_transforms_with_no_step_that_takes_them_is_a_warning(tmp_path: Path) -> None:
    body = "transforms:\n  storage-classes: {standard: fast}\nsteps:\n  - {id: a, uses: etcd}\n"
    found = problems(write(tmp_path, HEAD + body))
    assert found == [
        (5, "warning", "the plan has `transforms:` but no step takes them | add a step using kubernetes or kueue, "
         "or remove `transforms:`")
    ]  # fmt: skip
    taken = body.replace("uses: etcd}", "uses: etcd}\n  - {id: b, uses: kubernetes}")
    assert problems(write(tmp_path, HEAD + taken)) == []


def test_variables_from_values_file_then_environment_with_defaults_and_types(tmp_path: Path) -> None:
    body = "parallelism: ${PAR:-2}\ntarget:\n  etcd: {data_dir: '${DIR}/x', start: '${START:-false}'}\n"
    body += "objectives: {rto: '${RTO:-5m}'}\nsteps:\n  - {id: a, uses: etcd}\n"
    body += "variables: {PAR: p, DIR: d, START: s, RTO: r}\n"
    path = write(tmp_path, HEAD + body)
    values = write(tmp_path, "DIR: /from/values\nSTART: true\n", "values.yaml")
    loaded = load_plan(path, values=read_values(values), env={"DRTOOL_VAR_DIR": "/from/env", "DRTOOL_VAR_PAR": "7"})
    plan = loaded.require()
    assert plan.parallelism == 7 and plan.objectives.rto.total_seconds() == 300  # type: ignore[union-attr]
    assert plan.target["etcd"] == {"data_dir": "/from/values/x", "start": True}
    assert not loaded.unset


def test_graph_waves_and_downstream() -> None:
    plan = load_plan(PLANS / "full-cluster-rebuild.yaml", env={}).require()
    layers = waves(plan.steps)
    assert layers[0] == ["secrets-store", "images", "git", "checkpoints", "dns-certs"]
    assert "cluster-objects" in layers[1] and "kueue-quotas" in layers[2]
    assert downstream(plan.steps, "dns-certs") == {"cluster-objects", "kueue-quotas", "helm-releases"}


def test_cli_validate_and_show(cli: Cli, tmp_path: Path) -> None:
    proc = cli("plan", "validate", *map(str, SHIPPED))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(": valid") == len(SHIPPED)
    bad = write(tmp_path, HEAD + "steps:\n  - id: a\n    uses: etcd\n    needs: [zz]\n")
    proc = cli("plan", "validate", str(bad))
    assert_clean_error(proc, 2, "1 of 1 plan(s) invalid")
    assert f"{bad}:7: error: step a needs 'zz'" in proc.stdout
    assert_clean_error(cli("plan", "validate", str(tmp_path / "missing.yaml")), 6, "not found")
    html = tmp_path / "dag.html"
    proc = cli("plan", "show", str(PLANS / "full-cluster-rebuild.yaml"), "--html", str(html), check=True)
    assert "wave 3" in proc.stdout and "kueue-quotas (kueue) ← cluster-objects" in proc.stdout
    text = html.read_text()
    assert "<svg" in text and "cluster-objects" in text


def test_a_catalog_from_before_done_in_is_upgraded(tmp_path: Path) -> None:
    """Resume reads ``step_runs.done_in``; catalogs written before it existed gain it, filled from their rows."""
    db = tmp_path / "catalog.db"
    Catalog(str(db)).close()
    with sqlite3.connect(db) as conn:  # the table as drtool 0.1 made it
        conn.execute("ALTER TABLE step_runs DROP COLUMN done_in")
        conn.execute(
            "INSERT INTO restore_runs (id, kind, plan_name, plan_path, plan_sha256, values_path, store_id, "
            "backup_id, started, finished, status, resumed_from) "
            "VALUES ('run-b', 'restore', 'p', '/p.yaml', 'x', '', 's', 'b', 't', '', 'failed', 'run-a')"
        )
        rows = [("one", "ok", 0, "done in run run-a"), ("two", "ok", 1, "restored"), ("three", "failed", 2, "")]
        conn.executemany(
            "INSERT INTO step_runs (run_id, step_id, uses, status, attempts, started_s, finished_s, changed, "
            "summary, error, log) VALUES ('run-b', ?, 'etcd', ?, ?, 0, 0, 0, ?, '', '')",
            rows,
        )
    steps = {s.step_id: s.done_in for s in RunLog(Catalog(str(db))).steps("run-b")}
    assert steps == {"one": "run-a", "two": "run-b", "three": ""}
