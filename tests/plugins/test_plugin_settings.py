"""Typed plugin settings (drtool.plugin.settings): every built-in plugin declares the keys its source, target
and options accept, so a misspelled key is refused with a suggestion before anything runs; and the
platform-check hook (drtool.plugin.checks) lets a plugin add a plan check type without editing the core."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import Field

from drtool.errors import UsageError
from drtool.plans.checks import checks_left_out, run_checks, summary_of
from drtool.plans.validate import check_file
from drtool.plugin import settings
from drtool.plugin.checks import CheckSettings, PlatformCheck, Verdict
from drtool.plugin.contract import BasePlugin
from drtool.plugin.manager import GROUP, load_plugins, registry
from drtool.repo.repository import Repository
from drtool.scheduler.runner import SetRunner
from drtool.scheduler.sets import parse_backup_sets
from drtool.shards import run_shard_backup
from tests.fixtures.core import Cli, assert_clean_error

ROOT = Path(__file__).parents[2]
BUILT_IN = sorted(ep.name for ep in entry_points(group=GROUP) if ep.value.startswith("drtool_plugins."))

# plugin -> (a misspelled target key, the key meant), (a misspelled option key, the key meant or None: none)
TYPOS: dict[str, tuple[tuple[str, str], tuple[str, str | None]]] = {
    "checkpoints": (("endpont_url", "endpoint_url"), ("overwirte", "overwrite")),
    "dns-certs": (("zone_dri", "zone_dir"), ("externaldsn", "externaldns")),
    "etcd": (("data_dri", "data_dir"), ("bump_revison", "bump_revision")),
    "files": (("pth", "path"), ("dry_run", None)),  # the files restore takes no option at all
    "git": (("pth", "path"), ("forse", "force")),
    "helm": (("kubeconfg", "kubeconfig"), ("dryrun", "dry_run")),
    "images": (("registy", "registry"), ("registry_mapp", "registry_map")),
    "kubernetes": (("kubeconfg", "kubeconfig"), ("namespce_map", "namespace_map")),
    "kueue": (("kubeconfg", "kubeconfig"), ("alow_missing", "allow_missing")),
    "model-registry": (("artifact", "artifacts"), ("dryrun", "dry_run")),
    "vault": (("adress", "address"), ("mod", "mode")),  # a token key would be judged a secret or a path too
}


def plan_text(plugin: str, step_target: Mapping[str, Any], options: Mapping[str, Any], **extra: Any) -> str:
    step = {"id": "restore-it", "uses": plugin, "target": dict(step_target), "with": dict(options)}
    return yaml.safe_dump({"apiVersion": "drtool/v1", "kind": "RestorePlan", "name": "p", "steps": [step], **extra})


def errors_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return [p.render(path) for p in check_file(path, load_plugins()).errors]


def test_every_built_in_plugin_declares_its_settings() -> None:
    assert sorted(TYPOS) == BUILT_IN
    for name in BUILT_IN:
        schema = settings.schema_of(registry().plugins[name])
        assert schema.source and schema.target and schema.option, name


@pytest.mark.parametrize("plugin", sorted(TYPOS))
def test_plan_validate_rejects_a_misspelled_target_key(tmp_path: Path, plugin: str) -> None:
    (typo, meant), _ = TYPOS[plugin]
    found = errors_of(tmp_path, plan_text(plugin, {typo: "x"}, {}))
    assert len(found) == 1, found
    assert f"plan step 'restore-it': target key '{typo}' is unknown; did you mean '{meant}'?" in found[0]
    assert ":7: error:" in found[0]  # the line of the key


@pytest.mark.parametrize("plugin", sorted(TYPOS))
def test_plan_validate_rejects_a_misspelled_option_key(tmp_path: Path, plugin: str) -> None:
    _, (typo, meant) = TYPOS[plugin]
    found = errors_of(tmp_path, plan_text(plugin, {}, {typo: "x"}))
    assert len(found) == 1, found
    hint = f"did you mean '{meant}'?" if meant else "known keys: none"
    assert f"plan step 'restore-it': option key '{typo}' is unknown; {hint}" in found[0]


def test_the_plan_level_target_block_is_checked_at_its_own_line(tmp_path: Path) -> None:
    text = plan_text("vault", {}, {}, target={"vault": {"adress": "https://v:8200"}})
    found = errors_of(tmp_path, text)
    assert len(found) == 1 and "target key 'adress' is unknown; did you mean 'address'?" in found[0]
    assert re.search(r"plan\.yaml:\d+:", found[0])


def test_values_of_the_wrong_type_are_refused_and_unset_variables_wait(tmp_path: Path) -> None:
    found = errors_of(tmp_path, plan_text("kubernetes", {}, {"workers": "many", "existing": "merge"}))
    assert any("option key 'workers'" in e and "integer" in e for e in found), found
    assert any("option key 'existing'" in e and "'update'" in e for e in found), found
    text = plan_text("kubernetes", {}, {"workers": "${WORKERS}"}, variables={"WORKERS": "restore workers"})
    assert errors_of(tmp_path, text) == []  # checked when the plan runs with WORKERS set
    assert errors_of(tmp_path, plan_text("etcd", {}, {"at": "2026-12-01T14:05:00Z"})) == []  # the executor's key
    # command-line forms: strings for flags and lists
    assert errors_of(tmp_path, plan_text("kubernetes", {}, {"dry_run": "true", "namespace_map": "a=b,c=d"})) == []


def test_nested_settings_suggest_too() -> None:
    text = yaml.safe_dump({"sources": [{"url": "s3://b/p", "markrs": ["DONE"]}]})
    problems = settings.problems(
        settings.schema_of(registry().plugins["checkpoints"]).source, yaml.safe_load(text), "source"
    )
    assert [p.message for p in problems] == ["source key 'sources[0].markrs' is unknown; did you mean 'markers'?"]


def test_plan_validate_cli_says_it_in_one_line(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(plan_text("vault", {"adress": "https://v:8200"}, {"mod": "kv"}))
    proc = cli("plan", "validate", str(path))
    assert_clean_error(proc, 2, "1 of 1 plan(s) invalid")
    assert "target key 'adress' is unknown; did you mean 'address'?" in proc.stdout
    assert "option key 'mod' is unknown; did you mean 'mode'?" in proc.stdout


def shipped_plans() -> list[Path]:
    """restore-plans/ (the demo runs full-cluster-rebuild.yaml), and the test corpus' plan."""
    return [*sorted((ROOT / "restore-plans").glob("*.yaml")), ROOT / "tests" / "independence_corpus" / "plan.yaml"]


def doc_yaml_blocks() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for doc in sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]):
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", doc.read_text(), re.S)):
            try:
                data = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            if isinstance(data, dict):
                found.append((f"{doc.name}#{i}", data))
    return found


@pytest.mark.parametrize("path", shipped_plans(), ids=lambda p: p.name)
def test_every_shipped_plan_validates(path: Path) -> None:
    loaded = check_file(path, load_plugins())
    assert not loaded.errors, [p.render(path) for p in loaded.errors]


def test_every_docs_example_validates(tmp_path: Path) -> None:
    plugins, checked = load_plugins(), 0
    for where, data in doc_yaml_blocks():
        if data.get("kind") == "RestorePlan":  # a sketch: its settings must hold (its variables need not)
            assert [e for e in errors_of(tmp_path, yaml.safe_dump(data)) if " key '" in e] == [], where
            checked += 1
        sources = dict(data.get("sources") or {})
        for bset in (data.get("backup_sets") or {}).values():
            sources |= bset.get("sources") or {}
        for name, source in sources.items():
            settings.check_sources([plugins[name]], {name: source})
            checked += 1
        for step in data.get("steps") or []:  # a fragment of a plan
            settings.check(plugins[step["uses"]], "option", step.get("with") or {}, where)
            checked += 1
    assert checked >= 10


def test_a_config_source_with_a_misspelled_key_refuses_the_backup(cli: Cli, tmp_path: Path) -> None:
    """Nothing is written: the source is checked before the backup starts."""
    store = tmp_path / "store"
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": {"files": {"pahts": [str(tmp_path)]}}}))
    cli("init", "--store", str(store), check=True)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    proc = cli("backup", "-p", "files")
    assert_clean_error(proc, 2, "sources.files: source key 'pahts' is unknown; did you mean 'paths'?")
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_a_shard_worker_refuses_a_misspelled_source_key_before_writing(repo: Repository) -> None:
    before = sorted(repo.backend.list(""))
    with pytest.raises(UsageError, match=r"sources\.checkpoints: source key 'sorces' is unknown; did you mean"):
        run_shard_backup(
            repo, [registry().plugins["checkpoints"]], {"checkpoints": {"sorces": []}}, job="j1", index=0, count=2
        )
    assert sorted(repo.backend.list("")) == before


def test_the_scheduler_refuses_a_set_with_a_misspelled_source_key_at_start(repo: Repository) -> None:
    sets = parse_backup_sets(
        {"pki": {"plugins": ["files"], "interval": "1h", "sources": {"files": {"path": ["/etc/pki"]}}}}, "config.yaml"
    )
    with pytest.raises(UsageError, match=r"backup set pki: sources.files: source key 'path' is unknown; did you mean"):
        SetRunner(repo, sets, {})


def test_restore_and_diff_refuse_a_misspelled_target_pair(cli: Cli, tmp_path: Path) -> None:
    cli("init", "--store", str(tmp_path / "store"), check=True)
    proc = cli("--store", str(tmp_path / "store"), "restore", "latest", "-p", "git", "-t", "pth=/srv/git")
    assert_clean_error(proc, 2, "-t: target key 'pth' is unknown; did you mean 'path'?")
    proc = cli("--store", str(tmp_path / "store"), "diff", "latest", "-p", "kueue", "-t", "kubeconfg=/k")
    assert_clean_error(proc, 2, "-t: target key 'kubeconfg' is unknown; did you mean 'kubeconfig'?")


def test_describe_lists_each_part_with_types_defaults_and_meaning(cli: Cli) -> None:
    shown = cli("plugins", "--describe", "vault", check=True).stdout
    assert "vault: target keys" in shown and "token_file" in shown and "file holding the token" in shown
    for name in BUILT_IN:
        described = settings.settings_table(registry().plugins[name])
        assert set(described["settings"]) == {"source", "target", "option"}, name
        for rows in described["settings"].values():
            assert all(row["key"] and row["type"] for row in rows), name
    kube = json.loads(cli("plugins", "--describe", "kubernetes", "--json", check=True).stdout)["settings"]
    existing = next(r for r in kube["option"] if r["key"] == "existing")
    assert existing["type"] == "'update' | 'replace' | 'skip' | 'fail'" and existing["default"] == "'update'"


def test_secret_files_are_declared_in_one_place() -> None:
    """``*_file`` settings naming a secret go through SecretFile (where a path policy hooks in)."""
    for name in BUILT_IN:
        schema = settings.schema_of(registry().plugins[name])
        for model in (schema.source, schema.target, schema.option):
            for key, field in (model.model_fields if model else {}).items():
                hooks = [getattr(m, "func", None) for m in _metadata(field)]
                assert not key.endswith("_file") or settings.check_secret_file in hooks, (name, key)
    with pytest.raises(UsageError, match="token_file"):
        settings.check(registry().plugins["vault"], "target", {"token_file": " "}, "-t")


def _metadata(field: Any) -> list[Any]:
    annotation = field.annotation
    args = [annotation, *getattr(annotation, "__args__", ())]
    return [*field.metadata, *(m for a in args for m in getattr(a, "__metadata__", ()))]


# --- the platform-check hook ----------------------------------------------------------------------------


class FileHolds(CheckSettings):
    """A third party's check: a file on the restored machine holds a word."""

    path: str = Field(description="the file")
    word: str = Field(description="what it must hold")

    def summary(self) -> str:
        return f"{self.path} holds {self.word!r}"


def _file_holds(check: FileHolds, _context: Any, watch: Any) -> Verdict:
    text = Path(check.path).read_text() if Path(check.path).exists() else ""
    if check.word in text:
        watch.green()
    return Verdict(check.word in text, f"{check.path} {'holds' if check.word in text else 'lacks'} {check.word!r}")


class ThirdParty(BasePlugin):
    name, description = "third-party", "a plugin from outside drtool that contributes a plan check"
    backup = restore = verify = staticmethod(lambda *args: None)

    def platform_checks(self) -> list[PlatformCheck]:
        return [PlatformCheck("file-holds", FileHolds, _file_holds)]


@pytest.fixture
def third_party(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry().plugins, ThirdParty.name, ThirdParty())


def test_a_plugin_contributes_a_check_that_runs(tmp_path: Path, third_party: None) -> None:
    marker = tmp_path / "restored.txt"
    marker.write_text("the restored service is up\n")
    checks = [
        {"type": "file-holds", "id": "up", "path": str(marker), "word": "up"},
        {"type": "file-holds", "id": "down", "path": str(marker), "word": "down"},
    ]
    path = tmp_path / "plan.yaml"
    path.write_text(plan_text("files", {}, {}, checks=checks))
    loaded = check_file(path, load_plugins())
    assert not loaded.errors, loaded.errors
    assert summary_of(loaded.require().checks[0]) == f"{marker} holds 'up'"  # the runbook's line, the plugin's words
    results = {r.name: r for r in run_checks(loaded.require())}
    assert results["up"].ok and results["up"].detail == f"{marker} holds 'up'" and results["up"].green_s is not None
    assert not results["down"].ok and "lacks 'down'" in results["down"].detail
    # it reads no cluster: leaving the cluster out leaves it in
    assert checks_left_out(loaded.require(), {"kubernetes": "no lab"}) == {}


def test_a_contributed_check_is_validated_by_its_own_model(tmp_path: Path, third_party: None) -> None:
    checks = [{"type": "file-holds", "id": "up", "path": "/x", "wrd": "up"}, {"type": "file-hold", "id": "t"}]
    found = errors_of(tmp_path, plan_text("files", {}, {}, checks=checks))
    assert any("check key 'wrd' is unknown; did you mean 'word'?" in e for e in found), found
    assert any("unknown type 'file-hold' (did you mean 'file-holds'?)" in e for e in found), found


def test_without_the_plugin_its_check_type_is_unknown(tmp_path: Path) -> None:
    checks = [{"type": "file-holds", "id": "up", "path": "/x", "word": "up"}]
    found = errors_of(tmp_path, plan_text("files", {}, {}, checks=checks))
    assert len(found) == 1 and "unknown type 'file-holds'" in found[0]


def test_the_cluster_plugin_is_the_contracts_not_a_name(tmp_path: Path) -> None:
    """The kubernetes plugin says it restores a cluster; checks reading the cluster are left out with it."""
    assert [n for n, p in load_plugins().items() if getattr(p, "restores_cluster", False)] == ["kubernetes"]
    path = tmp_path / "plan.yaml"
    checks = [{"type": "workloads-ready", "id": "serving"}, {"type": "tcp", "id": "port", "address": "h:1"}]
    path.write_text(plan_text("kubernetes", {}, {}, checks=checks))
    left = checks_left_out(check_file(path, load_plugins()).require(), {"kubernetes": "no lab"})
    assert set(left) == {"serving"}


def test_a_plugin_reads_its_settings_through_its_model(tmp_path: Path) -> None:
    """The files plugin parses its mappings with its own models: a command-line list and a misspelled key."""
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("bb")
    files = registry().plugins["files"]
    assert files.discover({"paths": f"{tmp_path / 'a'},{tmp_path / 'b'}"}).counts == {"files": 2}
    with pytest.raises(UsageError, match="files: source key 'pahts' is unknown; did you mean 'paths'"):
        files.discover({"pahts": [str(tmp_path)]})
