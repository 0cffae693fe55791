"""RTO of `full-cluster-rebuild.yaml` rehearsed from a seeded lab, with the per-step breakdown and drtool's overhead.

    python bench/rehearsal_rto.py [--objects 5000 20000] [--plugins etcd,kubernetes,kueue]

For each size: a fresh source lab is seeded through the plugins' LabSupport (the kubernetes seed scaled to
about that many objects), backed up into a local encrypted store, then rehearsed into a fresh lab with the
source stopped and the network guard on — exactly `drtool rehearse --source-lab`. Recorded per size: the
RTO (source stopped to last check passed), each step's start and duration, and drtool's own phases:
planning (validate, resolve the backup, failure domain), the independence analysis and report writing,
as a fraction of the whole rehearsal. Results go to ``bench/results/rehearsal_rto-<stamp>.json`` and a
Markdown summary is printed. Machine facts come from bench/machine.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import REPO, machine_facts

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.lab.lab import Lab
from drtool.plans.loader import load_plan
from drtool.plugin.toolkit.kube.lab import OBJECTS_PER_SCALE
from drtool.rehearsal.rehearse import RehearsalOptions, rehearse
from drtool.rehearsal.target import lab_plugins, seed_sources
from drtool.repo.repository import Repository

RESULTS_DIR = REPO / "bench" / "results"
PLAN = REPO / "restore-plans" / "full-cluster-rebuild.yaml"


def one_size(objects: int, plugins: list[str], work: Path) -> dict[str, Any]:
    lab = Lab(f"bench-{objects}", work / "labs")
    chosen = lab_plugins(plugins)
    try:
        started = time.monotonic()
        sources = seed_sources(lab, chosen, max(1, round(objects / OBJECTS_PER_SCALE)))
        seeded_s = time.monotonic() - started
        repo = Repository.init(LocalBackend(work / f"store-{objects}"), passphrase="bench-only-passphrase")
        started = time.monotonic()
        manifest = run_backup(repo, chosen, sources)
        backup_s = time.monotonic() - started
        seed_total = json.loads((lab.root / "kube-seed.json").read_text())["total"]
        options = RehearsalOptions(source_lab=lab, source_stays_down=True, out_dir=work / "reports", labs_root=work)
        started = time.monotonic()
        result = rehearse(load_plan(PLAN), repo, options)
        wall_s = time.monotonic() - started
    finally:
        lab.down()
    run = result.report["run"]
    own = result.phases["plan_s"] + result.phases["analysis_s"] + result.phases["report_s"]
    return {
        "objects_requested": objects,
        "objects_seeded": seed_total,
        "plugins": plugins,
        "seed_s": round(seeded_s, 2),
        "backup_s": round(backup_s, 2),
        "backup_bytes": manifest.size,
        "ok": result.restored,
        "rto_s": run["rto"]["measured_s"],
        "rehearsal_wall_s": round(wall_s, 2),
        "phases_s": {k: round(v, 3) for k, v in result.phases.items()},
        "drtool_overhead_s": round(own, 3),
        "drtool_overhead_fraction": round(own / wall_s, 4),
        "steps": [
            {
                "id": s["id"],
                "uses": s["uses"],
                "status": s["status"],
                "start_s": round(s["started_s"], 2),
                "seconds": round(s["finished_s"] - s["started_s"], 2),
                "summary": s["summary"] or s["error"],
            }
            for s in run["steps"]
            if s["attempts"]
        ],
    }


def summarize(results: dict[str, Any]) -> str:
    lines = [
        "| objects | RTO | steps (start → seconds) | plan | analysis | report | drtool share | provision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        steps = ", ".join(f"{s['id']} {s['start_s']:.1f}→{s['seconds']:.1f}s" for s in r["steps"])
        p = r["phases_s"]
        lines.append(
            f"| {r['objects_seeded']:,} | {r['rto_s']:.1f} s | {steps} | {p['plan_s']:.2f} s | {p['analysis_s']:.2f} s "
            f"| {p['report_s']:.2f} s | {100 * r['drtool_overhead_fraction']:.1f} % | {p['provision_s']:.1f} s |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--plugins", default="etcd,kubernetes,kueue", help="plugins seeded and backed up")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    plugins = [p.strip() for p in args.plugins.split(",") if p.strip()]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results: dict[str, Any] = {"machine": machine_facts(), "plan": str(PLAN.relative_to(REPO)), "runs": []}
    with tempfile.TemporaryDirectory(prefix="drtool-bench-") as tmp:
        for objects in args.objects:
            results["runs"].append(one_size(objects, plugins, Path(tmp)))
            print(json.dumps(results["runs"][-1], indent=1), file=sys.stderr)
    results["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    output = args.output or RESULTS_DIR / f"rehearsal_rto-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2))
    print(summarize(results))
    print(f"\nresults: {output}")


if __name__ == "__main__":
    main()
