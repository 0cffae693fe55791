"""The drill matrix from catalog records (a real SQLite catalog), its HTML and metrics, and the guard that
keeps a drill off any cluster that is not a lab unless it is named and approved."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from drtool.catalog import Catalog
from drtool.catalog.runs import DrillRow, RunLog
from drtool.catalog.scenarios import ScenarioDrillRow, ScenarioLog
from drtool.drills import guard, matrix
from drtool.drills.scenarios import SCENARIOS
from drtool.errors import UsageError
from tests.fixtures.core import Cli, assert_clean_error

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def scenario_drill(scenario: str, hours_ago: float, ok: bool = True) -> ScenarioDrillRow:
    at = (NOW - dt.timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    return ScenarioDrillRow(id=f"run-{scenario}-{hours_ago}", scenario=scenario, plan_name="kueue-quotas-only",
                            target="127.0.0.1", ok=ok, injected_at=at, rpo_s=120.0, time_to_service_s=44.0)  # fmt: skip


def test_the_matrix_shows_each_scenario_latest_drill_and_age(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "catalog.db"))
    log = ScenarioLog(catalog)
    log.save(scenario_drill("kueue-config-deleted", 48, ok=False))
    log.save(scenario_drill("kueue-config-deleted", 2))
    RunLog(catalog).save(DrillRow(id="r1", started="2026-11-05T12:00:00Z", plan_name="full-cluster-rebuild",
                                  backup_id="b", target="lab", ok=True, rto_s=300.0))  # fmt: skip
    rows = {r["scenario"]: r for r in matrix.rows(log.all(), RunLog(catalog).drills(), NOW)}
    assert list(rows) == list(SCENARIOS)
    kueue = rows["kueue-config-deleted"]["last"]
    assert kueue["ok"] and kueue["age_s"] == 7200.0 and kueue["time_to_service_s"] == 44.0
    assert rows["whole-cluster-lost"]["last"]["age_s"] == 30 * 86400.0  # from the rehearsal records
    assert rows["namespace-deleted"]["last"] is None
    html = matrix.to_html(list(rows.values()), "2026-12-05T12:00:00Z")
    assert '<td class="age">2h00m</td>' in html and '<td class="age">720h00m</td>' in html
    text = generate_latest(matrix.registry(list(rows.values()))).decode()
    assert 'drtool_drill_last_age_seconds{scenario="kueue-config-deleted"} 7200.0' in text
    assert 'drtool_drill_last_result{scenario="kueue-config-deleted"} 1.0' in text
    assert 'drtool_drill_last_result{scenario="namespace-deleted"} -1.0' in text
    assert 'drtool_drill_last_age_seconds{scenario="namespace-deleted"}' not in text  # never drilled: no age


def test_a_drill_runs_on_a_lab_and_refuses_other_clusters_unless_named_and_approved() -> None:
    assert guard.allow("https://127.0.0.1:6443", None, False) == "127.0.0.1"
    assert guard.allow("https://localhost:6443", None, False) == "localhost"
    with pytest.raises(UsageError, match=r"refusing to drill prod\.example\.com: not a lab"):
        guard.allow("https://prod.example.com:6443", None, True)
    with pytest.raises(UsageError, match="not a lab"):
        guard.allow("https://10.0.0.5:6443", "10.0.0.6", True)  # named, but another cluster
    with pytest.raises(UsageError, match="named but not approved"):
        guard.allow("https://prod.example.com:6443", "prod.example.com", False)
    assert guard.allow("https://prod.example.com:6443", "prod.example.com", True) == "prod.example.com"


def test_drill_refuses_a_cluster_that_is_not_a_lab_before_touching_it(cli: Cli, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "prod.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        "clusters: [{name: prod, cluster: {server: 'https://prod.example.com:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: prod, context: {cluster: prod, user: u}}]\n"
    )
    store = tmp_path / "store"  # empty: the refusal comes before the store is read
    plan = Path(__file__).resolve().parents[2] / "restore-plans" / "kueue-quotas-only.yaml"
    proc = cli("--store", str(store), "drill", "kueue-config-deleted", "--plan", str(plan),
               "--kubeconfig", str(kubeconfig))  # fmt: skip
    assert_clean_error(proc, 2, "refusing to drill prod.example.com: not a lab")
