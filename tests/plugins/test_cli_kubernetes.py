"""The kubernetes plugin from the command line: backup from config, dry run, namespace mapping, verify."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.fixtures.core import Cli
from tests.fixtures.kube import KubeLab


def _namespaces(lab: KubeLab) -> set[str]:
    from kubernetes import client

    with lab.api_client() as api:
        return {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}


def test_backup_dry_run_and_mapped_restore(
    cli: Cli, tmp_path: Path, kube_source: KubeLab, kube_target: KubeLab
) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    source = {"kubeconfig": kube_source.readonly_kubeconfig, "include_namespaces": ["team-speech"]}
    config.write_text(yaml.safe_dump({"sources": {"kubernetes": source}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    backup = json.loads(cli("backup", "-p", "kubernetes", "--json", check=True).stdout)
    assert backup["status"] == "complete"
    assert backup["failure_domain"], "the API server's failure-domain facts are recorded"
    restore = ["restore", backup["id"], "-p", "kubernetes", "-t", f"kubeconfig={kube_target.kubeconfig}", "--json"]
    before = _namespaces(kube_target)
    dry = json.loads(cli(*restore, "--dry-run", check=True).stdout)
    assert dry["changed"] is False or "would" in dry["summary"]
    assert _namespaces(kube_target) == before  # a dry run writes nothing
    mapped = json.loads(cli(*restore, "--namespace-map", "team-speech=speech-dr", check=True).stdout)
    assert mapped["verified"] and mapped["changed"]
    assert "speech-dr" in _namespaces(kube_target) and "team-speech" not in _namespaces(kube_target)
    again = json.loads(cli(*restore, "--namespace-map", "team-speech=speech-dr", check=True).stdout)
    assert again["verified"]
