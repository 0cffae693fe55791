"""A Kubernetes restore against the API server's own limit: drtool's restore into an empty lab, paired with a
plain parallel client creating the same objects into another empty lab at the same concurrency.

    python bench/kube_restore_bound.py [--objects 20000] [--runs 2] [--workers 16]

A source lab (etcd + kube-apiserver from ``drtool_lab``) gets ``--objects`` objects over ``--namespaces``
namespaces: ConfigMaps, Secrets, Services, Deployments and ServiceAccounts (``MIX``), written through plain
HTTP. drtool backs it up into a local store; the source is stopped. The bodies drtool will send are read
out of that backup with drtool's own functions (``records``, ``body_for_apply``), level by level, into a
file, so the reference writes exactly the same objects. Then ``--runs`` times, alternating who goes
first, each into a new, empty lab that is stopped afterwards:

- **drtool**: ``drtool restore ID -p kubernetes -t kubeconfig=... --json`` (its verification on, the
  default), as an operator runs it;
- **plain**: this script's ``--plain`` mode in a process of its own: the same bodies, level after level
  (namespaces first), ``--workers`` requests in flight, each one ``--write``: ``create`` (POST with a
  field manager) or ``apply`` (server-side apply, ``force``): no reading of a store, no ordering beyond
  levels, no owners, no verification. Both writes are measured, which answers what each object costs the
  server.

Each measurement is one child process (wall, CPU, peak RSS of exactly it, and the CPU the target's
kube-apiserver and etcd spent meanwhile: ``kube_objects.Runner``) with the 1-minute load average it started
at. The ratio is per pair: plain time / drtool time, the share of the bound drtool reaches; beside it the same
ratio of CPU-seconds (client plus the target's servers), which the machine's load distorts less. Results go to
``bench/results/kube_restore_bound-<time>.json``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kube_objects import DRTOOL, PASSPHRASE, BenchError, KubeLab, Labs, Runner, drtool_env
from machine import machine_facts, write_results

# objects per 20: 8 ConfigMaps, 6 Secrets, 2 Services, 2 Deployments, 2 ServiceAccounts
MIX = (("configmaps", 8), ("secrets", 6), ("services", 2), ("deployments", 2), ("serviceaccounts", 2))


def generated(i: int, kind: str, namespace: str) -> tuple[str, dict[str, Any]]:
    """Object ``i`` of ``kind``: its collection path and body (a few hundred bytes, like a platform's)."""
    name = f"{kind[:-1]}-{i:06d}"
    meta = {"name": name, "namespace": namespace, "labels": {"app": f"app-{i % 50}", "tier": "bench"}}
    if kind == "configmaps":
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.yaml": f"k: {i}\n" * 20}}
    elif kind == "secrets":
        data = {"token": base64.b64encode(os.urandom(32)).decode()}
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data}
    elif kind == "services":
        port = {"name": "http", "port": 80, "targetPort": 8080}
        spec = {"selector": {"app": f"app-{i % 50}"}, "ports": [port]}
        body = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}
    elif kind == "deployments":
        container = {"name": "app", "image": "registry.example/app:1.0", "ports": [{"containerPort": 8080}]}
        template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}
        spec = {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    else:
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    group = "/apis/apps/v1" if kind == "deployments" else "/api/v1"
    return f"{group}/namespaces/{namespace}/{kind}", body


def seed(kube: KubeLab, objects: int, namespaces: int, workers: int) -> float:
    """Write the objects into the source lab; seconds taken."""
    from drtool.kube.client import KubeClient
    from drtool.kube.settings import Connection

    client = KubeClient(Connection.from_mapping({"kubeconfig": str(kube.apiserver.admin_kubeconfig)}))
    names = [f"team-{n:03d}" for n in range(namespaces)]
    started = time.perf_counter()
    for ns in names:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        client.request("POST", "/api/v1/namespaces", body=json.dumps(body).encode(), ok=(201, 409))
    per_round = sum(n for _, n in MIX)
    items = []
    for i in range(objects):
        kind = next(k for k, n in _cumulative() if i % per_round < n)
        items.append(generated(i, kind, names[i % namespaces]))

    def create(item: tuple[str, dict[str, Any]]) -> None:
        client.request("POST", item[0], body=json.dumps(item[1]).encode(), ok=(201, 409))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, items))
    return time.perf_counter() - started


def _cumulative() -> list[tuple[str, int]]:
    out, total = [], 0
    for kind, n in MIX:
        total += n
        out.append((kind, total))
    return out


def export_bodies(store: Path, backup_id: str, out: Path) -> dict[str, int]:
    """What drtool's restore will send, level by level, one JSON line per object: the reference's input."""
    from drtool.backends.local import LocalBackend
    from drtool.crypto.credentials import Credentials
    from drtool.kube.artifacts import records, types_in
    from drtool.kube.objects import body_for_apply
    from drtool.kube.order import levels
    from drtool.repo.repository import Repository
    from drtool.repo.restore_context import PluginRestoreContext

    repo = Repository.open(LocalBackend(store), Credentials(passphrase=PASSPHRASE))
    ctx = PluginRestoreContext(repo, repo.find_backup(backup_id), "kubernetes")
    counts: dict[str, int] = {}
    with out.open("w") as f:
        for n, level in enumerate(levels(types_in(ctx))):
            for t in level:
                for rec in records(ctx, t):
                    body = body_for_apply(rec, t)
                    ns, name = body["metadata"].get("namespace"), body["metadata"]["name"]
                    line = {"level": n, "collection": t.path(ns), "object": t.path(ns, name), "body": body}
                    f.write(json.dumps(line) + "\n")
                    counts[t.key] = counts.get(t.key, 0) + 1
    return counts


def plain(bodies: Path, kubeconfig: str, workers: int, write: str) -> None:
    """The reference client: the same bodies, level after level, ``workers`` requests in flight; an object
    the empty target already holds (the lab's own: default ServiceAccounts, kube-root-ca.crt) is left."""
    from drtool.kube.client import APPLY_PATCH, KubeClient
    from drtool.kube.settings import Connection

    client = KubeClient(Connection.from_mapping({"kubeconfig": kubeconfig}))
    by_level: dict[int, list[dict[str, Any]]] = {}
    for line in bodies.read_text().splitlines():
        item = json.loads(line)
        by_level.setdefault(item["level"], []).append(item)

    def one(item: dict[str, Any]) -> None:
        data = json.dumps(item["body"]).encode()
        if write == "create":
            client.request("POST", item["collection"], params={"fieldManager": "plain"}, body=data, ok=(201, 409))
        else:
            params = {"fieldManager": "plain", "force": "true"}
            client.request("PATCH", item["object"], params=params, body=data, content_type=APPLY_PATCH)

    with ThreadPoolExecutor(workers) as pool:
        for level in sorted(by_level):
            list(pool.map(one, by_level[level]))


def measure_drtool(
    runner: Runner, labs: Labs, work: Path, backup: dict[str, Any], run: int, verify: bool
) -> dict[str, Any]:
    target = labs.up(f"kr-drtool-{run}")
    try:
        env = drtool_env(work / "homes" / f"restore-{run}", "unused")
        argv = [*DRTOOL, "--store", backup["store"], "restore", backup["id"], "-p", "kubernetes", "--json"]
        argv += ["-t", f"kubeconfig={target.apiserver.admin_kubeconfig}", *([] if verify else ["--no-verify"])]
        m, out = runner.measure(argv, env, f"drtool-{run}", target.pids, ok=(0, 7))
    finally:
        labs.down(target)
    report = json.loads(out)
    by_type = report["details"]["by_type"]
    return dataclasses.asdict(m) | {
        "objects": sum(sum(c.values()) for c in by_type.values()),
        "created": sum(c.get("created", 0) for c in by_type.values()),
        "apply_seconds": report["details"]["seconds"],
        "verified": report["verified"],
    }


def measure_plain(runner: Runner, labs: Labs, bodies: Path, workers: int, write: str, run: int) -> dict[str, Any]:
    target = labs.up(f"kr-plain-{write}-{run}")
    try:
        argv = [sys.executable, str(Path(__file__).resolve()), "--plain", str(bodies)]
        argv += ["--kubeconfig", str(target.apiserver.admin_kubeconfig), "--workers", str(workers), "--write", write]
        m, _ = runner.measure(argv, dict(os.environ), f"plain-{write}-{run}", target.pids)
    finally:
        labs.down(target)
    return dataclasses.asdict(m)


def total_cpu(row: dict[str, Any]) -> float:
    """The client's CPU plus what the target's kube-apiserver and etcd spent meanwhile: on two shared cores
    every CPU-second of the client is one the server does not get, and load moves this far less than wall time."""
    return row["cpu_seconds"] + sum(row["server_cpu_seconds"].values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=16, help="requests in flight (drtool's restore default: 16)")
    ap.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True, help="drtool's verification")
    ap.add_argument("--write", action="append", choices=["create", "apply"], help="the reference's writes")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/drtool-kube-bound"))
    ap.add_argument("--plain", type=Path, help=argparse.SUPPRESS)  # the reference client's own process
    ap.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain:
        return plain(args.plain, args.kubeconfig, args.workers, (args.write or ["create"])[0])
    writes = args.write or ["create", "apply"]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    work = args.workdir / stamp
    (work / "logs").mkdir(parents=True)
    os.environ["DRTOOL_LAB_DIR"] = str(work / "labs")
    runner = Runner(work / "logs", max_load=1000.0, max_wait=0.0)  # paired runs: no waiting for a quiet machine
    labs = Labs(work / "labs")
    results: dict[str, Any] = {"machine": machine_facts(), "settings": {k: str(v) for k, v in vars(args).items()}}
    rows: dict[str, list[dict[str, Any]]] = {"drtool": [], **{f"plain_{w}": [] for w in writes}}
    try:
        source = labs.up("kr-source")
        results["seed_seconds"] = seed(source, args.objects, args.namespaces, args.workers)
        print(f"seeded {args.objects} objects in {results['seed_seconds']:.0f} s", flush=True)
        store = work / "store"
        env = drtool_env(work / "homes" / "backup", str(source.apiserver.readonly_kubeconfig))
        runner.measure([*DRTOOL, "init", "--store", str(store), "--no-save"], env, "init", {})
        _, out = runner.measure(
            [*DRTOOL, "--store", str(store), "backup", "-p", "kubernetes", "--json"], env, "backup", {}
        )
        backup = {"store": str(store), "id": json.loads(out)["id"]}
        labs.down(source)
        bodies = work / "bodies.jsonl"
        results["objects_by_type"] = export_bodies(store, backup["id"], bodies)
        for run in range(args.runs):
            order = ["drtool", *writes] if run % 2 == 0 else [*writes, "drtool"]
            for who in order:
                if who == "drtool":
                    row = measure_drtool(runner, labs, work, backup, run, args.verify)
                else:
                    row = measure_plain(runner, labs, bodies, args.workers, who, run)
                rows["drtool" if who == "drtool" else f"plain_{who}"].append(row)
                print(f"run {run} {who}: {row['seconds']:.1f} s, {row['cpu_seconds']:.1f} CPU-s, "
                      f"servers {row['server_cpu_seconds']}, load {row['loadavg_1m']}", flush=True)  # fmt: skip
    finally:
        labs.down_all()
        results["rows"] = rows
        shutil.rmtree(work / "homes", ignore_errors=True)
    summary: dict[str, Any] = {"objects": sum(results["objects_by_type"].values())}
    for name, row_list in rows.items():
        summary[name] = {
            "seconds_median": statistics.median(r["seconds"] for r in row_list),
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in row_list),
            "server_cpu_seconds": [r["server_cpu_seconds"] for r in row_list],
            "load": [r["loadavg_1m"] for r in row_list],
        }
    for w in writes:
        pairs = list(zip(rows[f"plain_{w}"], rows["drtool"], strict=True))
        ratios = [p["seconds"] / d["seconds"] for p, d in pairs]
        summary[f"drtool_of_bound_{w}"] = {"median": statistics.median(ratios), "pairs": ratios}
        cpu = [total_cpu(p) / total_cpu(d) for p, d in pairs]
        summary[f"drtool_of_bound_{w}_cpu"] = {"median": statistics.median(cpu), "pairs": cpu}
    results["summary"] = summary
    print(json.dumps(summary, indent=2))
    print(write_results("kube_restore_bound", results))


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        raise SystemExit(f"bench: {exc}") from None
