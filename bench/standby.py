"""Warm standby against the cold path, in one run (docs/standby.md, "Measured").

    python bench/standby.py [--objects 5000] [--writes-per-s 5] [--load-s 60] [--bare]

A seeded primary (``--objects`` objects) and an empty standby, each a **living** control plane (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok's nodes: Deployments get pods that run), or
bare (etcd + kube-apiserver) with ``--bare``; the store in MinIO. The primary runs an application (a counter
ConfigMap and a Deployment ``web`` of 3 replicas) and, in the living lab, a **training run**: the lab trainer
(drtool_lab.trainer) trains in bursts against the primary site's checkpoint bucket, a checkpoint every 10
steps, and a `drtool backup -p checkpoints` of the same set every ``--checkpoint-backup-s``. `drtool follow
-p kubernetes` runs on the primary (a child process) and `drtool standby` on the standby (a thread). Then:

1. **Hydration**: time until the standby applied the first full.
2. **Lag under write load**: a writer patches a counter ConfigMap ``--writes-per-s`` times a second for
   ``--load-s`` seconds (each write is one "step"); every second are sampled: the time since the first
   step the standby does not hold yet was written on the primary (write→standby, end to end, read through
   the standby's API), the standby's lag metric, and its age (now minus the newest applied link's source
   time): median, p95 and max.
3. **Failover**: the writer stops, the follower and the trainer are killed with SIGKILL mid-period and the
   primary stopped (the last write is the failure time; what the follower buffered is lost), and
   `drtool failover` runs against the standby with a plan: its checkpoints step restored into the standby
   site's bucket, then its platform checks (``workloads-ready``: ``web`` Available, its pods Running on Ready
   nodes; the counter read back). RTO: command start to the last check green (bare: to release done); RPO in
   seconds (failure minus the newest change applied), in writes (the counter the standby holds against the
   last one written) and in training steps (the last checkpoint the trainer completed against the step the
   failover's restored checkpoint resumes from).
4. **Cold path** (a rehearsal from the newest backup): a fresh control plane of the same kinds started, the
   chain's newest point restored by the restore a rehearsal runs (``run_restore``, verified), the newest
   checkpoints backup restored, and the same checks: time to start the lab, and restore start to the last
   check green.

Results go to ``bench/results/standby-<stamp>.json`` with the machine's facts and load, and a Markdown
summary is printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from drtool_lab.components.kube_apiserver import KubeApiserver
from drtool_lab.components.minio import MinioServer
from drtool_lab.kube_seed import seed
from drtool_lab.lab import BARE_KINDS, Lab
from drtool_lab.training import trainer_env
from machine import REPO, load, machine_facts

from drtool.backends.backend import open_backend
from drtool.plans.checks import run_checks
from drtool.plans.schema import Plan
from drtool.plans.validate import check_file
from drtool.plugin.manager import get_plugin, load_plugins
from drtool.points import Point
from drtool.repo.chains import ChainReader, build_chains, plan_point
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.standby.failover import failover
from drtool.standby.hydrate import Standby
from drtool.standby.state import StateStore
from drtool.standby.steps import newest_holding

RESULTS_DIR = REPO / "bench" / "results"
PASSPHRASE = "bench-only-passphrase"
# `drtool follow -p kubernetes` in a child process of its own, so the failure can kill it mid-period
FOLLOWER = """
import sys
from drtool.backends.backend import open_backend
from drtool.crypto.credentials import Credentials
from drtool.follow import FollowSession, run_follow
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
import os
url, kubeconfig, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
repo = Repository.open(open_backend(url), Credentials(passphrase=os.environ["DRTOOL_PASSPHRASE"]))
session = FollowSession(repo, "kubernetes", "bench", {"period": period})
session.install_signal_handlers()
run_follow(repo, get_plugin("kubernetes"), {"kubeconfig": kubeconfig}, session)
"""
# `drtool backup -p checkpoints` of the set every few seconds (a short-interval CronJob) in a child process,
# killed with the primary: a backup in flight at the failure never publishes
CHECKPOINT_BACKUPS = """
import json, os, sys, time
from drtool.backends.backend import open_backend
from drtool.backup import run_backup
from drtool.crypto.credentials import Credentials
from drtool.plugin.manager import get_plugin
from drtool.repo.repository import Repository
url, sources, every = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
repo = Repository.open(open_backend(url), Credentials(passphrase=os.environ["DRTOOL_PASSPHRASE"]))
while True:
    t0 = time.monotonic()
    run_backup(repo, [get_plugin("checkpoints")], {"checkpoints": sources}, backup_set="bench")
    print(round(time.monotonic() - t0, 2), flush=True)
    time.sleep(max(0.0, every - (time.monotonic() - t0)))
"""
SET, PLUGIN, NS, COUNTER = "bench", "kubernetes", "bench-load", "step"
LIVING_KINDS = (*BARE_KINDS, "kube-controller-manager", "kube-scheduler", "kwok")
RUN, EVERY, BURST = "mlp", 10, 20  # the training run's folder; a checkpoint every 10 steps, 20 steps a burst


def _kube(lab: Lab) -> KubeApiserver:
    server = lab["kube-apiserver"]
    assert isinstance(server, KubeApiserver)
    return server


def _core(server: KubeApiserver) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(server.admin_kubeconfig)))


def _up(work: Path, name: str, kinds: tuple[str, ...]) -> Lab:
    lab = Lab(name, root=work / "labs")
    lab.add("etcd")
    lab.add("kube-apiserver")
    lab.up(kinds)
    return lab


def _app(server: KubeApiserver) -> Any:
    """The application: a namespace with the counter ConfigMap and a Deployment ``web`` of 3 replicas that
    tolerates every taint (kwok's GPU pools); returns the core client."""
    from kubernetes import client

    core = _core(server)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    core.create_namespaced_config_map(
        NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=COUNTER), data={"step": "0"})
    )
    labels = {"app": "web"}
    pod = client.V1PodSpec(
        containers=[client.V1Container(name="web", image="registry.invalid/web:1")],
        tolerations=[client.V1Toleration(operator="Exists")],
    )
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=3,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels), spec=pod),
        ),
    )
    client.AppsV1Api(core.api_client).create_namespaced_deployment(NS, deployment)
    return core


def _plan(work: Path, checkpoints: dict[str, Any] | None) -> Plan:
    """The failover's plan: the cluster objects (the standby's), the checkpoints into the standby site's
    bucket, and the platform checks that say service is back."""
    steps: list[dict[str, Any]] = [{"id": "cluster-objects", "uses": PLUGIN}]
    if checkpoints is not None:
        steps.append({"id": "checkpoints", "uses": "checkpoints"})
    checks = [
        {"type": "workloads-ready", "id": "web-serving", "namespaces": [NS], "timeout": "5m"},
        {"type": "kube-object", "id": "counter", "apiVersion": "v1", "kind": "ConfigMap", "namespace": NS,
         "name": COUNTER, "field": "data.step"},
    ]  # fmt: skip
    body = {"apiVersion": "drtool/v1", "kind": "RestorePlan", "name": "bench-failover", "steps": steps,
            "checks": checks, "target": {"checkpoints": checkpoints} if checkpoints else {}}  # fmt: skip
    path = work / "failover-plan.json"
    path.write_text(json.dumps(body))
    return check_file(path, load_plugins()).require()


class Trainer(threading.Thread):
    """A live training run: the lab trainer in bursts of ``BURST`` steps (each continuing from the newest
    complete checkpoint, as a restarted pod would), a checkpoint every ``EVERY``; the step of the newest
    complete one and when it was saved. ``kill`` stops it mid-burst, as the failure does."""

    def __init__(self, lab: Lab, location: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.env = trainer_env(lab, location, RUN)
        self.saved, self.saved_at = 0, 0.0
        self.stop = threading.Event()
        self.proc: subprocess.Popen[str] | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            argv = [sys.executable, "-m", "drtool_lab.trainer", "train", "--until", str(self.saved + BURST)]
            self.proc = subprocess.Popen(
                [*argv, "--every", str(EVERY)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env=self.env,
            )  # fmt: skip
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                said = json.loads(line)
                if "saved" in said:
                    self.saved, self.saved_at = int(said["saved"]), float(said["at"])
            self.proc.wait()
            self.stop.wait(2.0)

    def kill(self) -> None:
        self.stop.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.join(60)


def _wait(check: Any, what: str, timeout: float = 600.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"bench: {what} not within {timeout:.0f} s")


def _say(what: str) -> None:
    print(f"{dt.datetime.now(dt.UTC):%H:%M:%S} {what} (load {load():.1f})", file=sys.stderr, flush=True)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class Writer(threading.Thread):
    """Patches the counter ConfigMap ``rate`` times a second: the step it last wrote, and when."""

    def __init__(self, core: Any, rate: float) -> None:
        super().__init__(daemon=True)
        self.core, self.rate, self.step, self.last_write = core, rate, 0, time.time()
        self.written: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.core.patch_namespaced_config_map(COUNTER, NS, {"data": {"step": str(self.step + 1)}})
            self.step += 1
            self.last_write = time.time()
            self.written[self.step] = self.last_write
            self.stop.wait(1 / self.rate)

    def staleness(self, seen: int) -> float:
        """How long ago the first step the standby does not hold yet was written (0: it holds the newest)."""
        first_missing = self.written.get(seen + 1)
        return 0.0 if first_missing is None else max(0.0, time.time() - first_missing)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    kinds = BARE_KINDS if args.bare else LIVING_KINDS
    figures: dict[str, Any] = {"objects": args.objects, "writes_per_s": args.writes_per_s, "load_s": args.load_s,
                               "lab": "bare" if args.bare else "living: " + " + ".join(kinds)}  # fmt: skip
    minio_lab = Lab("bench-minio", root=work / "labs")
    minio_lab.up(["minio"])
    labs: list[Lab] = [minio_lab]
    follower: subprocess.Popen[bytes] | None = None
    backups: subprocess.Popen[str] | None = None
    trainer: Trainer | None = None
    try:
        minio = minio_lab["minio"]
        assert isinstance(minio, MinioServer)
        os.environ.update(minio.env())
        os.environ["DRTOOL_FILE_FOLDERS"] = str(work)  # the plan's checkpoint targets name the lab MinIO's key file
        bucket = f"standby-{uuid.uuid4().hex[:8]}"
        for name in (bucket, "training", "standby-checkpoints", "cold-checkpoints"):
            minio.create_bucket(name)
        keys = {"endpoint_url": minio.api_url, "credentials_file": str(minio.credentials_file())}
        repo = Repository.init(open_backend(f"s3://{bucket}/store"), passphrase=PASSPHRASE)
        primary = _up(work, "bench-primary", kinds)
        labs.append(primary)
        t0 = time.monotonic()
        figures["seeded"] = seed(_kube(primary).access(), args.objects).total
        figures["seed_s"] = round(time.monotonic() - t0, 1)
        _say(f"primary seeded: {figures['seeded']} objects in {figures['seed_s']} s")
        core = _app(_kube(primary))
        standby_lab = _up(work, "bench-standby", kinds)
        labs.append(standby_lab)
        target = str(_kube(standby_lab).admin_kubeconfig)
        training = None if args.bare else {"url": "s3://training/runs", **keys}
        if training is not None:
            trainer = Trainer(minio_lab, training)
            trainer.start()
            sources = json.dumps({"sources": [{"name": "training", **training}]})
            backups = subprocess.Popen(
                [sys.executable, "-c", CHECKPOINT_BACKUPS, repo.backend.url, sources, str(args.checkpoint_backup_s)],
                env={**os.environ, "DRTOOL_PASSPHRASE": PASSPHRASE}, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        t0 = time.monotonic()
        follower = subprocess.Popen(
            [sys.executable, "-c", FOLLOWER, repo.backend.url, str(_kube(primary).admin_kubeconfig), str(args.period)],
            env={**os.environ, "DRTOOL_PASSPHRASE": PASSPHRASE},
        )
        standby = Standby(
            repo,
            SET,
            [get_plugin(PLUGIN)],
            {"kubeconfig": target},
            StateStore(target, SET),
            delete_after=args.delete_after,
        )
        _wait(lambda: standby.round().applied or standby.record.applied, "the first full on the standby")
        figures["hydrated_s"] = round(time.monotonic() - t0, 1)
        _say(f"standby hydrated in {figures['hydrated_s']} s")
        stop_rounds = threading.Event()
        rounds = threading.Thread(target=standby.run, args=(args.interval, stop_rounds), daemon=True)
        rounds.start()
        writer = Writer(core, args.writes_per_s)
        writer.start()
        lags, e2e, ages, loads = [], [], [], []
        standby_core = _core(_kube(standby_lab))
        end = time.monotonic() + args.load_s
        while time.monotonic() < end:
            time.sleep(1.0)
            lag = standby.metrics.lag(SET)
            if lag is not None:
                lags.append(lag)
            e2e.append(writer.staleness(int(standby_core.read_namespaced_config_map(COUNTER, NS).data["step"])))
            link_time = (standby.record.plugins.get(PLUGIN) or {}).get("link_time")
            if link_time:
                ages.append(time.time() - dt.datetime.fromisoformat(link_time.replace("Z", "+00:00")).timestamp())
            loads.append(load())
        writer.stop.set()
        writer.join()
        figures["lag_s"] = {"median": _pct(lags, 0.5), "p95": _pct(lags, 0.95), "max": _pct(lags, 1.0)}
        figures["write_to_standby_s"] = {"median": _pct(e2e, 0.5), "p95": _pct(e2e, 0.95), "max": _pct(e2e, 1.0)}
        figures["age_s"] = {"median": _pct(ages, 0.5), "p95": _pct(ages, 0.95), "max": _pct(ages, 1.0)}
        figures["steps_written"] = writer.step
        figures["load_during"] = round(statistics.mean(loads), 1) if loads else None
        _say(f"load phase done: {figures['write_to_standby_s']}")
        # the failure: the primary, its follower and the training run die together, mid-period
        failed_at = dt.datetime.fromtimestamp(writer.last_write, dt.UTC)
        follower.send_signal(signal.SIGKILL)
        follower.wait(30)
        if trainer is not None and backups is not None:
            trainer.kill()
            backups.kill()
            seconds = [float(line) for line in (backups.communicate(timeout=30)[0] or "").split()]
            figures["training"] = {"last_complete_step": trainer.saved, "checkpoint_backups": len(seconds),
                                   "checkpoint_backup_s": _pct(seconds, 0.5)}  # fmt: skip
        url = _kube(primary).url
        primary.down()
        stop_rounds.set()
        rounds.join(120)
        plan = _plan(work, None if args.bare else {"url": "s3://standby-checkpoints/runs", **keys})
        result = failover(repo, standby, plan=plan, primary=[url], failed_at=failed_at)
        steps = int(_core(_kube(standby_lab)).read_namespaced_config_map(COUNTER, NS).data["step"])
        _say(f"failover: ok {result.ok}, RTO {result.rto_s} s, RPO {result.rpo_s} s, {result.checks}")
        figures["failover"] = {
            "ok": result.ok,
            "rto_s": result.rto_s,
            "rpo_s": result.rpo_s,
            "rpo_steps": writer.step - steps,
            "released": result.released,
            "links_in_last_round": len(result.caught_up),
            "steps": [{k: s[k] for k in ("id", "ok", "detail", "finished_s")} for s in result.steps],
            "checks": [{k: c[k] for k in ("name", "ok", "detail", "green_s")} for c in result.checks],
            "resume_steps": result.resume_steps,
        }
        if "training" in figures:
            resumed = max(result.resume_steps.values(), default=0)
            figures["training"] |= {"resumed_from": resumed, "rpo_training_steps": trainer.saved - resumed}
        figures["cold"] = _cold(args, work, repo, kinds, labs, None if args.bare else keys)
        figures["load_end"] = round(load(), 1)
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        if trainer is not None:
            trainer.kill()
        if backups is not None and backups.poll() is None:
            backups.kill()
        for lab in reversed(labs):
            lab.down()
    return figures


def _cold(
    args: argparse.Namespace, work: Path, repo: Repository, kinds: tuple[str, ...], labs: list[Lab],
    keys: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    """The cold path in the same run: a fresh lab, the newest point and checkpoints restored, the same checks."""
    t0 = time.monotonic()
    cold = _up(work, "bench-cold", kinds)
    labs.append(cold)
    out: dict[str, Any] = {"lab_start_s": round(time.monotonic() - t0, 1)}
    reader = ChainReader(repo)
    chains = build_chains(reader.links(PLUGIN), repo.max_skew)
    point = plan_point([c for c in chains if c.backup_set == SET], Point())
    target = {"kubeconfig": str(_kube(cold).admin_kubeconfig)}
    clock0 = time.monotonic()
    outcome = run_restore(repo, point, get_plugin(PLUGIN), target)
    out["restore_s"], out["verified"] = round(time.monotonic() - clock0, 1), outcome.verified
    overrides: dict[str, dict[str, Any]] = {PLUGIN: target}
    if keys is not None:
        ckpt = {"url": "s3://cold-checkpoints/runs", **keys}
        manifest = newest_holding(repo, SET, "checkpoints", None)
        assert manifest is not None
        run_restore(repo, manifest, get_plugin("checkpoints"), ckpt)
        out["checkpoints_restored_s"] = round(time.monotonic() - clock0, 1)
        overrides["checkpoints"] = ckpt
    checks = run_checks(_plan(work, None), overrides, clock=lambda: time.monotonic() - clock0)
    out["checks"] = [{"name": c.name, "ok": c.ok, "green_s": c.green_s} for c in checks]
    out["to_service_s"] = round(max((c.green_s or c.finished_s) for c in checks), 1)
    return out


def summarize(figures: dict[str, Any]) -> str:
    fo, e2e, age, cold = figures["failover"], figures["write_to_standby_s"], figures["age_s"], figures["cold"]
    training = figures.get("training") or {}
    return "\n".join(
        [
            "| objects | writes/s | hydrate | write→standby median / p95 / max | age median / p95 | RPO | RPO writes "
            "| RPO training steps | failover to service | cold: lab start + restore to service | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {figures['seeded']} | {figures['writes_per_s']} | {figures['hydrated_s']} s | "
            f"{e2e['median']} / {e2e['p95']} / {e2e['max']} s | {age['median']} / {age['p95']} s | {fo['rpo_s']} s | "
            f"{fo['rpo_steps']} | {training.get('rpo_training_steps', '-')} | {fo['rto_s']} s (ok: {fo['ok']}) | "
            f"{cold['lab_start_s']} s + {cold['to_service_s']} s | {figures['load_during']} |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--writes-per-s", type=float, default=5.0)
    parser.add_argument("--load-s", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=2.0, help="the follower's seconds between deltas")
    parser.add_argument("--interval", type=float, default=1.0, help="the standby's seconds between rounds")
    parser.add_argument("--delete-after", type=float, default=3600.0)
    parser.add_argument("--bare", action="store_true", help="bare control planes: no controllers, no training run")
    parser.add_argument("--checkpoint-backup-s", type=float, default=15.0, help="seconds between checkpoint backups")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-standby-") as tmp:
        figures = run(args, Path(tmp))
    figures["machine"] = machine_facts()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"standby-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(figures, indent=2))
    print(summarize(figures))
    print(f"\nwrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
