"""Velero next to drtool on the same objects: backup and restore wall time, objects/s, CPU-seconds, peak RSS.

    python bench/peer_velero.py [--objects 0] [--runs 3]

One source lab (etcd + kube-apiserver, bare: nothing reconciles, so both tools read the same objects every
run) seeded like ``drtool lab seed NAME --objects N`` (0: the base seed, about 200 objects), with the lab's
MinIO and Velero (``drtool lab up --with velero``: built from its module, lab/gomod/velero). ``--runs`` times,
alternating who goes first:

- **drtool backup**: ``python -m drtool --store DIR backup -p kubernetes --json`` into a fresh local store,
  measured as one process (``kube_objects.Runner``: wall time, its CPU and peak RSS through ``wait4``);
- **velero backup**: ``velero backup create NAME --wait`` asking for the objects drtool keeps (``VELERO_MATCH``;
  the first one is then imported with ``drtool import velero`` and its per-type counts compared with drtool's
  backup, untimed: ``matched`` in the results), the CLI measured the same way, plus the CPU the
  Velero server and its plugin processes spent meanwhile (``/proc/PID/stat``) and the server's peak RSS
  (``VmHWM``: its peak since it started, so a later run never reports less than an earlier one).

Restores, ``--runs`` times each, alternating, each into a new bare lab: drtool's ``restore latest -p
kubernetes -t kubeconfig=...`` (with its default verify), and Velero's ``velero restore create --from-backup
--wait`` by a Velero started in the new lab, after the backup's objects were copied into that lab's MinIO and
Velero's sync made the Backup appear (not timed). Velero verifies nothing after a restore; drtool's time
includes its verification. Medians of the runs are printed as Markdown with the 1-minute load average each
run started at; raw results go to ``bench/results/peer_velero-<stamp>.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from kube_objects import DRTOOL, RESULTS_DIR, BenchError, KubeLab, Labs, Runner, drtool_env, proc_cpu_seconds, save
from machine import machine_facts

from drtool.kube.skips import SKIPPED_RESOURCES

BACKUP = "bench"
# Velero is asked for what drtool keeps: every cluster-scoped type, minus the types drtool's default skip list
# leaves out (Velero takes no glob in an exclude) and the bootstrap RBAC the new API server makes itself
VELERO_MATCH = (
    "--include-cluster-resources=true",
    "--exclude-resources=" + ",".join(k for k in SKIPPED_RESOURCES if "*" not in k),
    "--selector=kubernetes.io/bootstrapping notin (rbac-defaults)",
)


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process whose parent chain leads to it (Velero's plugin processes)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        tree += children
        todo += children
    return tree


def tree_cpu(pid: int) -> float:
    return sum(proc_cpu_seconds(p) for p in process_tree(pid))


def hwm_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


@dataclasses.dataclass
class Peers:
    runner: Runner
    labs: Labs
    work: Path
    source: KubeLab
    document: dict[str, Any]
    output: Path

    def record(self, entry: dict[str, Any]) -> None:
        self.document["runs"].append(entry)
        save(self.output, self.document)
        m = entry["measurement"]
        print(f"{entry['tool']} {entry['op']} run {entry['run']}: {m['seconds']} s, load {m['loadavg_1m']}", flush=True)

    def velero_env(self, velero: Any) -> dict[str, str]:
        home = self.work / "homes" / "velero"
        home.mkdir(parents=True, exist_ok=True)
        return {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}

    def velero_cli(self, velero: Any, *args: str) -> list[str]:
        from drtool_lab.gomods import lab_binary

        return [str(lab_binary("velero")), *args, f"--kubeconfig={velero.kubeconfig_path}", "--namespace=velero-lab"]

    def drtool_backup(self, run: int) -> dict[str, Any]:
        tag, store = f"drtool-backup-r{run}", self.work / "stores" / f"r{run}"
        env = drtool_env(self.work / "homes" / tag, str(self.source.apiserver.readonly_kubeconfig))
        self.runner.measure(
            [*DRTOOL, "init", "--store", str(store), "--no-save"], env, f"{tag}-init", {}, quiet_first=False
        )
        m, out = self.runner.measure([*DRTOOL, "--store", str(store), "backup", "-p", "kubernetes", "--json"], env,
                                     tag, self.source.pids)  # fmt: skip
        meta = json.loads(out)["plugins"]["kubernetes"]["meta"]
        return {"tool": "drtool", "op": "backup", "run": run, "measurement": dataclasses.asdict(m),
                "objects": meta["objects"], "store": str(store)}  # fmt: skip

    def velero_backup(self, run: int) -> dict[str, Any]:
        velero = self.source.lab["velero"]
        name = f"{BACKUP}-r{run}"
        before = tree_cpu(velero.pid)
        argv = self.velero_cli(velero, "backup", "create", name, *VELERO_MATCH, "--wait")
        m, _ = self.runner.measure(argv, self.velero_env(velero), f"velero-backup-r{run}", self.source.pids)
        server_cpu = tree_cpu(velero.pid) - before
        status = velero.final("backups", name, 600)["status"]
        if status.get("phase") != "Completed":
            raise BenchError(f"velero backup {name}: {status}")
        return {"tool": "velero", "op": "backup", "run": run, "measurement": dataclasses.asdict(m),
                "objects": status["progress"]["itemsBackedUp"], "server_cpu_seconds": round(server_cpu, 2),
                "server_peak_rss_kib": hwm_kib(velero.pid), "backup": name}  # fmt: skip

    def drtool_restore(self, run: int, backup: dict[str, Any]) -> dict[str, Any]:
        target = self.labs.up(f"drtool-target-r{run}")
        try:
            tag = f"drtool-restore-r{run}"
            env = drtool_env(self.work / "homes" / tag, str(target.apiserver.readonly_kubeconfig))
            argv = [*DRTOOL, "--store", backup["store"], "restore", "latest", "-p", "kubernetes",
                    "-t", f"kubeconfig={target.apiserver.admin_kubeconfig}", "--json"]  # fmt: skip
            m, _ = self.runner.measure(argv, env, tag, target.pids)
            return {"tool": "drtool", "op": "restore", "run": run, "measurement": dataclasses.asdict(m),
                    "objects": backup["objects"], "verified": True}  # fmt: skip
        finally:
            self.labs.down(target)

    def velero_restore(self, run: int, backup: dict[str, Any]) -> dict[str, Any]:
        target = self.labs.up(f"velero-target-r{run}")
        try:
            target.lab.up(["velero"])
            velero = target.lab["velero"]
            copy_backup(self.source.lab["minio"], target.lab["minio"], backup["backup"])
            path = f"/apis/velero.io/v1/namespaces/velero-lab/backups/{backup['backup']}"
            from drtool_lab.kube_seed import KubeClient

            from drtool.servers import process

            client = KubeClient(velero.access())
            process.wait_until(lambda: bool(client.get(path)), 180, "Velero syncing the copied backup")
            before = tree_cpu(velero.pid)
            m, _ = self.runner.measure(
                self.velero_cli(velero, "restore", "create", f"r{run}", "--from-backup", backup["backup"], "--wait"),
                self.velero_env(velero), f"velero-restore-r{run}", target.pids)  # fmt: skip
            server_cpu = tree_cpu(velero.pid) - before
            status = velero.final("restores", f"r{run}", 600)["status"]
            return {"tool": "velero", "op": "restore", "run": run, "measurement": dataclasses.asdict(m),
                    "objects": backup["objects"], "phase": status.get("phase"), "warnings": status.get("warnings"),
                    "server_cpu_seconds": round(server_cpu, 2), "server_peak_rss_kib": hwm_kib(velero.pid)}  # fmt: skip
        finally:
            self.labs.down(target)

    def matched(self, drtool: dict[str, Any], velero: dict[str, Any]) -> dict[str, Any]:
        """Whether both backups hold the same objects, by drtool's own reading: Velero's backup imported
        (``drtool import velero``: drtool's skip rules applied to what Velero wrote), its per-type counts
        against drtool's backup's. Velero's extra objects are those the rules leave out (not timed)."""
        env = drtool_env(self.work / "homes" / "match", str(self.source.apiserver.readonly_kubeconfig))
        env |= self.source.lab["minio"].env()
        store = str(self.work / "stores" / "velero-import")

        def run(name: str, *args: str) -> str:
            return self.runner.measure([*DRTOOL, *args], env, f"match-{name}", {}, quiet_first=False)[1]

        run("init", "init", "--store", store, "--no-save")
        imported = run("import", "--store", store, "import", "velero", velero["backup"], "--from", velero_location(),
                       "--json")  # fmt: skip
        shown = run("show", "--store", store, "show", json.loads(imported)["backup"], "--json")
        native = run("native", "--store", drtool["store"], "show", "latest", "--json")
        ours, theirs = type_counts(json.loads(native)), type_counts(json.loads(shown))
        differ = {k: {"drtool": ours.get(k, 0), "velero": theirs.get(k, 0)} for k in sorted(ours.keys() | theirs.keys())
                  if ours.get(k, 0) != theirs.get(k, 0)}  # fmt: skip
        return {"drtool_objects": drtool["objects"], "velero_items": velero["objects"],
                "velero_kept_by_drtool_rules": sum(theirs.values()), "types_differing": differ}  # fmt: skip


def velero_location() -> str:
    return "s3://velero/lab"  # lab/components/velero.py: BUCKET, PREFIX


def type_counts(shown: dict[str, Any]) -> dict[str, int]:
    resources = shown["plugins"]["kubernetes"]["meta"]["resources"]
    return {key: meta["count"] for key, meta in resources.items() if meta["count"]}


def copy_backup(source: Any, target: Any, name: str) -> None:
    """Velero's objects of one backup, from the source lab's bucket into the target lab's (same keys)."""
    src, dst = source.client(), target.client()
    prefix = f"lab/backups/{name}/"
    for item in src.list_objects_v2(Bucket="velero", Prefix=prefix)["Contents"]:
        body = src.get_object(Bucket="velero", Key=item["Key"])["Body"].read()
        dst.put_object(Bucket="velero", Key=item["Key"], Body=body)


def summary(runs: list[dict[str, Any]]) -> str:
    rows = ["| tool | operation | objects | wall s (median) | objects/s | CPU-s | peak RSS MiB | load at start |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for tool in ("drtool", "velero"):
        for op in ("backup", "restore"):
            mine = [r for r in runs if r["tool"] == tool and r["op"] == op]
            if not mine:
                continue
            wall = statistics.median(r["measurement"]["seconds"] for r in mine)
            cpu = statistics.median(r["measurement"]["cpu_seconds"] + r.get("server_cpu_seconds", 0) for r in mine)
            rss = max(max(r["measurement"]["peak_rss_kib"], r.get("server_peak_rss_kib", 0)) for r in mine) / 1024
            loads = ", ".join(str(r["measurement"]["loadavg_1m"]) for r in mine)
            objects = mine[0]["objects"]
            rows.append(
                f"| {tool} | {op} | {objects} | {wall:.2f} | {objects / wall:.0f} | {cpu:.2f} | {rss:.0f} | {loads} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=0, help="bulk objects on top of the base seed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-load", type=float, default=4.0, help="wait for the 1-minute load to drop below")
    parser.add_argument("--settle", type=float, default=60.0, help="wait at most this long for it")
    parser.add_argument("--work", type=Path, default=Path("/tmp/drtool-peer-velero"))
    args = parser.parse_args()
    os.environ["DRTOOL_LAB_DIR"] = str(args.work / "labs")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(exist_ok=True)
    output = RESULTS_DIR / f"peer_velero-{stamp}.json"
    document: dict[str, Any] = {"machine": machine_facts(), "args": vars(args) | {"work": str(args.work)}, "runs": []}
    for scratch in ("stores", "homes"):  # a previous run's (its stores would refuse `drtool init`)
        shutil.rmtree(args.work / scratch, ignore_errors=True)
    (args.work / "logs").mkdir(parents=True, exist_ok=True)
    labs = Labs(args.work / "labs")
    try:
        from drtool_lab.kube_seed import seed

        source = labs.up("source")
        seed(source.apiserver.access(), args.objects)
        source.lab.up(["velero"])
        runner = Runner(args.work / "logs", args.max_load, args.settle)
        peers = Peers(runner, labs, args.work, source, document, output)
        backups: dict[str, dict[str, Any]] = {}
        for run in range(1, args.runs + 1):
            order = ("drtool", "velero") if run % 2 else ("velero", "drtool")
            for tool in order:
                entry = peers.drtool_backup(run) if tool == "drtool" else peers.velero_backup(run)
                backups.setdefault(tool, entry)
                peers.record(entry)
        document["matched"] = peers.matched(backups["drtool"], backups["velero"])
        save(output, document)
        source.lab["velero"].stop()  # one Velero per machine (lab/components/velero.py): the targets' need the port
        print(f"object sets: {json.dumps(document['matched'])}", flush=True)
        for run in range(1, args.runs + 1):
            order = ("drtool", "velero") if run % 2 else ("velero", "drtool")
            for tool in order:
                restore = peers.drtool_restore if tool == "drtool" else peers.velero_restore
                peers.record(restore(run, backups[tool]))
    finally:
        labs.down_all()
    print(summary(document["runs"]))
    print(f"raw results: {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
