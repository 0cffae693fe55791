"""Time to service of `full-cluster-rebuild.yaml` rehearsed on the living lab, by step, by waiting for
controllers, and drtool's own share.

    python bench/rehearsal_rto.py [--objects 5000 20000] [--plugins kubernetes,kueue]

For each size: a living source lab (controllers, scheduler, kwok GPU nodes, Kueue, cert-manager) is seeded
through the plugins' LabSupport (the kubernetes seed scaled to about that many objects) and backed up into a
local encrypted store; the source is stopped (one living lab at a time on a shared 2-core machine), a fresh
living lab is started as the target, and the plan is rehearsed into it with the source's ports refused
(`drtool rehearse --target KUBECONFIG --source-lab`). Recorded per size: **restore steps done** and **time to
service** (every check green: Kueue admitted the probe job onto its flavor and its pod runs, the restored
Deployments serve, cert-manager re-issued nothing, the collector deleted nothing restored), each step's start
and duration, each platform check's wait for its controllers, and drtool's own time: planning (validate,
resolve the backup, failure domain), the independence analysis and report writing, as a share of the time
to service plus that. drtool's CPU seconds over the rehearsal are recorded too. Results go to
``bench/results/rehearsal_rto-<stamp>.json`` and a Markdown summary is printed. Machine facts come from
bench/machine.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from drtool_lab.cluster import OBJECTS_PER_SCALE
from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.lab import LIVING_KINDS, Lab
from drtool_lab.targets import LabSource, lab_plugins, seed_sources
from machine import REPO, machine_facts

from drtool.backends.local import LocalBackend
from drtool.backup import run_backup
from drtool.plans.loader import load_plan
from drtool.rehearsal.rehearse import RehearsalOptions, rehearse
from drtool.repo.repository import Repository

RESULTS_DIR = REPO / "bench" / "results"
PLAN = REPO / "restore-plans" / "full-cluster-rebuild.yaml"


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_size(objects: int, plugins: list[str], work: Path) -> dict[str, Any]:
    source, target = Lab(f"bench-{objects}", work / "labs"), Lab(f"bench-{objects}-target", work / "labs")
    chosen = lab_plugins(plugins)
    try:
        started = time.monotonic()
        source.up(LIVING_KINDS)
        sources = seed_sources(source, chosen, max(1, round(objects / OBJECTS_PER_SCALE)))
        seeded_s = time.monotonic() - started
        repo = Repository.init(LocalBackend(work / f"store-{objects}"), passphrase="bench-only-passphrase")
        started = time.monotonic()
        manifest = run_backup(repo, chosen, sources)
        backup_s = time.monotonic() - started
        seed_total = json.loads((source.root / "kube-seed.json").read_text())["total"]
        source.down(purge=False)  # gone before the target starts: one living lab at a time
        started = time.monotonic()
        target.up(LIVING_KINDS)
        target_s = time.monotonic() - started
        server = target.first("kube-apiserver")
        assert isinstance(server, KubeApiserver)
        options = RehearsalOptions(
            target=str(server.admin_kubeconfig),
            source=LabSource(source),
            source_stays_down=True,
            out_dir=work / "reports",
            isolation="in-process",  # the target runs outside any namespace: its webhooks must stay reachable
        )
        cpu, started = _cpu_s(), time.monotonic()
        result = rehearse(load_plan(PLAN), repo, options)
        wall_s, cpu_s = time.monotonic() - started, _cpu_s() - cpu
    finally:
        target.down()
        source.down()
    figures = (seeded_s, backup_s, manifest.size, target_s, wall_s, cpu_s)
    return summarize_run(result, objects, seed_total, plugins, *figures)


def summarize_run(result: Any, objects: int, seed_total: int, plugins: list[str], *figures: float) -> dict[str, Any]:
    seeded_s, backup_s, backup_bytes, target_s, wall_s, cpu_s = figures
    run, phases = result.report["run"], result.phases
    rto = run["rto"]
    own = phases["plan_s"] + phases["analysis_s"] + phases["report_s"]
    service = rto["service_s"]
    checks = [c for c in result.report["checks"] if c["step"] == "plan"]
    return {
        "objects_requested": objects,
        "objects_seeded": seed_total,
        "plugins": plugins,
        "seed_s": round(seeded_s, 2),
        "backup_s": round(backup_s, 2),
        "backup_bytes": backup_bytes,
        "target_up_s": round(target_s, 2),
        "ok": result.restored,
        "rto": rto,
        "waiting_for_controllers_s": round(service - rto["restored_s"], 2) if service is not None else None,
        "rehearsal_wall_s": round(wall_s, 2),
        "rehearsal_cpu_s": round(cpu_s, 2),
        "phases_s": {k: round(v, 3) for k, v in phases.items()},
        "drtool_overhead_s": round(own, 3),
        "drtool_overhead_fraction": round(own / (own + service), 4) if service is not None else None,
        "steps": [
            {
                "id": s["id"],
                "status": s["status"],
                "start_s": round(s["started_s"], 2),
                "seconds": round(s["finished_s"] - s["started_s"], 2),
                "summary": s["summary"],
                "error": s["error"],
                "failed_checks": [f"{c['name']}: {c['detail']}" for c in s["checks"] if not c["ok"]],
            }
            for s in run["steps"]
            if s["attempts"]
        ],
        "checks": [
            {
                "id": c["name"],
                "ok": c["ok"],
                "waited_s": round(c["green_s"] - c["started_s"], 2) if c.get("green_s") is not None else None,
                "seconds": round(c["finished_s"] - c["started_s"], 2),
                "detail": c["detail"],
            }
            for c in checks
        ],
    }


def _s(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else "-"


def summarize(results: dict[str, Any]) -> str:
    lines = [
        "| objects | steps done | first workload running | time to service | waiting for controllers | "
        "steps (start → seconds) | checks (waited) | drtool's own | share | drtool CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        steps = ", ".join(f"{s['id']} {s['start_s']:.1f}→{s['seconds']:.1f}s" for s in r["steps"])
        checks = ", ".join(f"{c['id']} {_s(c['waited_s'])}" for c in r["checks"])
        share = f"{100 * r['drtool_overhead_fraction']:.1f} %" if r["drtool_overhead_fraction"] is not None else "-"
        rto = r["rto"]
        lines.append(
            f"| {r['objects_seeded']:,} | {_s(rto['restored_s'])} | {_s(rto['first_workload_s'])} | "
            f"{_s(rto['service_s'])} | {_s(r['waiting_for_controllers_s'])} | {steps} | {checks} | "
            f"{r['drtool_overhead_s']:.2f} s | {share} | {r['rehearsal_cpu_s']:.1f} s |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--plugins", default="kubernetes,kueue", help="plugins seeded and backed up")
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
