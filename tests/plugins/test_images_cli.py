"""The images plugin from the command line: backup from the config file, restore with -t, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import requests
import yaml

from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.registry import RegistryLab


def test_cli_backup_restore_and_unmapped_registry(
    cli: Cli, tmp_path: Path, registry_source: RegistryLab, registry_target: RegistryLab
) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"sources": {"images": {"images": [registry_source.ref("trainer")]}}}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    backup = json.loads(cli("backup", "-p", "images", "--json", check=True).stdout)
    assert backup["status"] == "complete"

    missing = cli("restore", backup["id"], "-p", "images", "-t", "registry_map=elsewhere.example=x.example")
    assert_clean_error(missing, 2, "no target registry", registry_source.host)

    restore = ["restore", backup["id"], "-p", "images", "-t", f"registry={registry_target.host}", "--json"]
    dry = json.loads(cli(*restore, "--dry-run", check=True).stdout)
    assert (dry["checks"], dry["verification"], dry["verified"]) == ([], "none", False)  # nothing to check
    assert not dry["changed"] and "would push" in dry["summary"], dry
    catalog = requests.get(f"http://{registry_target.host}/v2/_catalog", timeout=10).json()
    assert catalog["repositories"] == []  # a dry run writes nothing
    done = json.loads(cli(*restore, check=True).stdout)
    assert done["verified"] and done["changed"]
    again = json.loads(cli(*restore, check=True).stdout)
    assert again["verified"] and not again["changed"]
