"""Plan check types come from plugins through the ``platform_checks`` hook (drtool.plugin.checks): a plugin
installed from outside drtool adds one with no edit of the core, and drtool's own platform checks come the same
way, each from the plugin it belongs to."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drtool.plans.checks import run_checks, summary_of
from drtool.plans.validate import check_file
from drtool.plugin.checks import contributed
from drtool.plugin.manager import load_plugins, registry

TEST_PLUGIN = Path(__file__).parents[1] / "data" / "check_plugins" / "drtool_test_checks.py"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test plugin as an installed distribution: its module and its entry point on ``sys.path``."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(TEST_PLUGIN, site / TEST_PLUGIN.name)
    info = site / "drtool_test_checks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: drtool-test-checks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[drtool.plugins]\nmarker = drtool_test_checks:MarkerPlugin\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "drtool_test_checks", raising=False)
    registry.cache_clear()  # found again, with the new distribution
    yield
    registry.cache_clear()  # and without it once sys.path is restored


def test_an_installed_plugin_contributes_a_check_that_is_found_validated_and_run(
    installed: None, tmp_path: Path
) -> None:
    restored = tmp_path / "restored.txt"
    restored.write_text("the service is up\n")
    path = tmp_path / "plan.yaml"
    path.write_text(
        "name: marked\nsteps:\n  - id: copy\n    uses: files\nchecks:\n"
        f"  - {{type: file-says, id: up, path: '{restored}', words: up, step: copy}}\n"
        f"  - {{type: file-says, id: down, path: '{restored}', words: down}}\n"
    )
    assert "marker" in load_plugins() and "file-says" in contributed(load_plugins())
    loaded = check_file(path, load_plugins())
    assert not loaded.errors, loaded.errors
    plan = loaded.require()
    assert summary_of(plan.checks[0]) == f"{restored} says 'up'"  # the runbook's line: the plugin's words
    results = {r.name: r for r in run_checks(plan)}
    assert results["up"].ok and results["up"].green_s is not None and results["up"].facts == {"bytes": 18}
    assert not results["down"].ok and results["down"].detail == f"{restored} does not say 'down'"


def test_a_contributed_check_is_validated_by_its_plugins_model(installed: None, tmp_path: Path) -> None:
    """A misspelled key gets a suggestion from the plugin's model; a ``step`` must name a step of the plan."""
    path = tmp_path / "plan.yaml"
    path.write_text(
        "name: marked\nsteps:\n  - id: copy\n    uses: files\nchecks:\n"
        "  - {type: file-says, id: up, path: /x, wrods: up}\n"
    )
    errors = [p.message for p in check_file(path, load_plugins()).errors]
    assert any("check key 'wrods' is unknown; did you mean 'words'?" in e for e in errors), errors
    path.write_text(
        "name: marked\nsteps:\n  - id: copy\n    uses: files\nchecks:\n"
        "  - {type: file-says, id: up, path: /x, words: up, step: cpy}\n"
    )
    errors = [p.message for p in check_file(path, load_plugins()).errors]
    assert any("check 'up' names step 'cpy', which the plan does not have" in e for e in errors), errors


def test_each_platform_check_comes_from_the_plugin_it_belongs_to() -> None:
    """No core place names them: each built-in plugin's hook contributes its own."""
    found = {name: sorted(c.type for c in p.platform_checks()) for name, p in load_plugins().items()}
    assert {name: types for name, types in found.items() if types} == {
        "checkpoints": ["training-resumes"],
        "dns-certs": ["no-reissue"],
        "kubernetes": ["gc-stable", "workloads-ready"],
        "kueue": ["kueue-admits"],
    }
    assert all(c.reads_cluster for c in contributed(load_plugins()).values())
