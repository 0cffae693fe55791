"""The cost of the independence analysis and of writing the reports, against a seeded lab's backup.

    python bench/independence_analysis.py [--objects 5000 20000] [--runs 3]

For each size: a lab (etcd + kube-apiserver, under a fresh ``DRTOOL_LAB_DIR``) is seeded like
``drtool lab seed --objects N``, backed up with the kubernetes plugin into a fresh local store, and the
lab is stopped. Then, ``--runs`` times: ``analyze()`` of a one-step plan (the kubernetes step: the plugin's
``dependencies()`` and the reference finder each read every artifact of the backup, which is the whole
cost) and ``write_report()`` of the result (JSON, Markdown, HTML), each timed on its own, plus the
process's peak RSS; the finder's own share and the number of fields it searched are reported too. Results are
printed as JSON and Markdown. The machine is shared: the 1-minute load average at each size is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import machine_facts

PASSPHRASE = "independence-bench"  # a throwaway store; not a secret


def measure(objects: int, runs: int, work: Path) -> dict[str, Any]:
    from drtool_lab.kube_seed import seed
    from drtool_lab.lab import Lab
    from drtool_plugins.kubernetes import KubernetesPlugin

    from drtool.backends.local import LocalBackend
    from drtool.independence.analysis import analyze
    from drtool.plans.schema import Plan
    from drtool.repo.repository import Repository
    from drtool.repo.writer import BackupSession
    from drtool.report.render import write_report

    lab = Lab(f"bench-indep-{objects}", root=work / "labs")
    lab.add("etcd")
    lab.add("kube-apiserver")
    try:
        lab.up()
        server = lab["kube-apiserver"]
        seeded = seed(server.access(), objects)  # type: ignore[attr-defined]
        repo = Repository.init(LocalBackend(work / f"store-{objects}"), passphrase=PASSPHRASE)
        with BackupSession(repo) as session:
            outcome = session.run_plugin(KubernetesPlugin(), {"kubeconfig": str(server.admin_kubeconfig)})  # type: ignore[attr-defined]
            assert outcome.status == "ok", outcome.error
            manifest = session.commit()
        kubeconfig = str(server.admin_kubeconfig)  # type: ignore[attr-defined]
    finally:
        lab.down()
    plan = Plan.model_validate({"name": "bench", "steps": [{"id": "cluster", "uses": "kubernetes"}]})
    targets = {"cluster": {"kubeconfig": kubeconfig}}
    analysis, reporting, finder, findings, fields = [], [], [], 0, 0
    for i in range(runs):
        start = time.perf_counter()
        report = analyze(plan, repo, manifest, targets)
        analysis.append(time.perf_counter() - start)
        data = {"kind": "independence", "plan": {"name": "bench"}, "backup": {"id": manifest.id}}
        data["independence"] = report.to_dict()
        start = time.perf_counter()
        write_report(data, work / "reports", f"bench-{objects}-{i}")
        reporting.append(time.perf_counter() - start)
        findings = len(report.findings)
        finder.append(report.finder["seconds"])
        fields = sum(p["fields"] for p in report.finder["scanned"].values())
    return {
        "objects_seeded": seeded.created + seeded.existing,
        "backup_bytes": manifest.size,
        "findings": findings,
        "fields_searched": fields,
        "finder_median_s": round(statistics.median(finder), 3),
        "analysis_s": [round(t, 3) for t in analysis],
        "report_s": [round(t, 3) for t in reporting],
        "analysis_median_s": round(statistics.median(analysis), 3),
        "report_median_s": round(statistics.median(reporting), 3),
        "load_1min": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drtool-bench-indep-") as tmp:
        os.environ["DRTOOL_LAB_DIR"] = str(Path(tmp) / "labs")
        results = {str(n): measure(n, args.runs, Path(tmp)) for n in args.objects}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"machine": machine_facts(), "peak_rss_mib": round(peak), "results": results}, indent=2))
    print("\n| objects | backup | findings | fields searched | analysis (median) | finder | report | load |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r in results.items():
        size = f"{r['backup_bytes'] / 2**20:.1f} MiB"
        times = f"{r['analysis_median_s']} s | {r['finder_median_s']} s | {r['report_median_s']} s"
        print(f"| {n} | {size} | {r['findings']} | {r['fields_searched']} | {times} | {r['load_1min']:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
