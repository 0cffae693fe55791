"""The README's first command, run as a newcomer would: the whole story, every plugin with lab support."""

from __future__ import annotations

import json
import re
from pathlib import Path

from drtool.lab.process import alive
from drtool.rehearsal.target import lab_plugins
from tests.fixtures.core import Cli


def test_demo_seeds_backs_up_stops_the_source_and_rehearses_the_full_rebuild(cli: Cli, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    proc = cli("demo", "--workdir", str(workdir), env={"DRTOOL_PASSPHRASE": None}, timeout=1500)  # type: ignore[dict-item]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    out = proc.stdout
    every = [p.name for p in lab_plugins()]
    assert {"etcd", "kubernetes", "kueue"} <= set(every)
    for name in every:  # each plugin with LabSupport was seeded and is in the backup
        assert f"seeded {name} in" in out, name
    assert "source lab source stopped" in out and "cluster-objects" in out
    assert re.search(r"RTO \S+ vs objective 1h00m: met", out) and re.search(r"RPO \S+ vs objective 24h00m: met", out)
    html = Path(re.findall(r"report: (\S+\.html)", out.replace("\n", ""))[-1])
    report = json.loads(html.with_suffix(".json").read_text())
    steps = {s["id"]: s for s in report["run"]["steps"]}
    assert steps["cluster-objects"]["status"] == steps["kueue-quotas"]["status"] == "ok"
    assert report["independence"]["verdict"] in ("pass", "unknown", "waived", "fail")  # a finding, shown
    assert "<svg" in html.read_text()
    passphrase = (workdir / "passphrase").read_text().strip()
    assert passphrase not in out + proc.stderr + html.read_text()
    # nothing is left running: the source lab, the rehearsal's lab and any etcd a restore started
    states = [json.loads(p.read_text()) for p in workdir.glob("**/lab.json")]
    pids = [c.get("pid") for s in states for c in s.get("components", {}).values()]
    pids += [json.loads(p.read_text()).get("server", {}).get("pid") for p in workdir.glob("**/*.drtool-restore.json")]
    assert pids and not any(alive(p) for p in pids if p)
