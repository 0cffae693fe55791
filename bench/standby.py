"""Warm standby against the cold path, in one run (docs/standby.md, "Measured").

    python bench/standby.py [--objects 5000] [--writes-per-s 5] [--load-s 60] [--delete-after 3600]

A seeded primary (bare control plane: etcd + kube-apiserver, ``--objects`` objects) and an empty standby,
the store in MinIO. `drtool follow -p kubernetes` runs on the primary and `drtool standby` on the standby,
each in a thread of this process. Then:

1. **Hydration**: time until the standby applied the first full.
2. **Lag under write load**: a writer patches a counter ConfigMap ``--writes-per-s`` times a second for
   ``--load-s`` seconds (each write is one "step"); every second are sampled: the time since the first
   step the standby does not hold yet was written on the primary (write→standby, end to end, read through
   the standby's API), the standby's lag metric, and its age (now minus the newest applied link's source
   time): median, p95 and max.
3. **Failover**: the writer stops, the follower (a child process) is killed with SIGKILL mid-period and the
   primary stopped (the last write is the failure time; what the follower buffered is lost), and
   `drtool failover` runs against the standby: RTO (command start to release done; a bare control plane
   has no controllers, so "service" is every hold released), RPO in seconds (failure minus the newest change
   applied) and in steps (the counter the standby holds against the last one written).
4. **Cold path**: the newest recovery point of the same chain restored into a fresh control plane by the
   restore a rehearsal runs (``run_restore`` of the chain's point, verified): its wall time.

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
from machine import REPO, load, machine_facts

from drtool.backends.backend import open_backend
from drtool.plugin.manager import get_plugin
from drtool.points import Point
from drtool.repo.chains import ChainReader, build_chains, plan_point
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.standby.failover import failover
from drtool.standby.hydrate import Standby
from drtool.standby.state import StateStore

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
SET, PLUGIN, NS, COUNTER = "bench", "kubernetes", "bench-load", "step"


def _kube(lab: Lab) -> KubeApiserver:
    server = lab["kube-apiserver"]
    assert isinstance(server, KubeApiserver)
    return server


def _core(server: KubeApiserver) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(server.admin_kubeconfig)))


def _up(work: Path, name: str) -> Lab:
    lab = Lab(name, root=work / "labs")
    lab.add("etcd")
    lab.add("kube-apiserver")
    lab.up(BARE_KINDS)
    return lab


def _wait(check: Any, what: str, timeout: float = 600.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"bench: {what} not within {timeout:.0f} s")


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
    from kubernetes import client

    figures: dict[str, Any] = {"objects": args.objects, "writes_per_s": args.writes_per_s, "load_s": args.load_s}
    minio_lab = Lab("bench-minio", root=work / "labs")
    minio_lab.up(["minio"])
    labs: list[Lab] = [minio_lab]
    follower: subprocess.Popen[bytes] | None = None
    try:
        minio = minio_lab["minio"]
        assert isinstance(minio, MinioServer)
        os.environ.update(minio.env())
        bucket = f"standby-{uuid.uuid4().hex[:8]}"
        minio.create_bucket(bucket)
        repo = Repository.init(open_backend(f"s3://{bucket}/store"), passphrase=PASSPHRASE)
        primary = _up(work, "bench-primary")
        labs.append(primary)
        t0 = time.monotonic()
        figures["seeded"] = seed(_kube(primary).access(), args.objects).total
        figures["seed_s"] = round(time.monotonic() - t0, 1)
        core = _core(_kube(primary))
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
        core.create_namespaced_config_map(
            NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=COUNTER), data={"step": "0"})
        )
        standby_lab = _up(work, "bench-standby")
        labs.append(standby_lab)
        target = str(_kube(standby_lab).admin_kubeconfig)
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
        # the failure: the primary and its follower die together, mid-period (what the follower buffered is lost)
        failed_at = dt.datetime.fromtimestamp(writer.last_write, dt.UTC)
        follower.send_signal(signal.SIGKILL)
        follower.wait(30)
        url = _kube(primary).url
        primary.down()
        stop_rounds.set()
        rounds.join(120)
        result = failover(repo, standby, primary=[url], failed_at=failed_at)
        steps = int(_core(_kube(standby_lab)).read_namespaced_config_map(COUNTER, NS).data["step"])
        figures["failover"] = {
            "rto_s": result.rto_s,
            "rpo_s": result.rpo_s,
            "rpo_steps": writer.step - steps,
            "released": result.released,
            "links_in_last_round": len(result.caught_up),
        }
        cold = _up(work, "bench-cold")
        labs.append(cold)
        reader = ChainReader(repo)
        chains = build_chains(reader.links(PLUGIN), repo.max_skew)
        point = plan_point([c for c in chains if c.backup_set == SET], Point())
        t0 = time.monotonic()
        outcome = run_restore(repo, point, get_plugin(PLUGIN), {"kubeconfig": str(_kube(cold).admin_kubeconfig)})
        figures["cold_restore_s"] = round(time.monotonic() - t0, 1)
        figures["cold_verified"] = outcome.verified
        figures["load_end"] = round(load(), 1)
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        for lab in reversed(labs):
            lab.down()
    return figures


def summarize(figures: dict[str, Any]) -> str:
    fo, e2e, age = figures["failover"], figures["write_to_standby_s"], figures["age_s"]
    return "\n".join(
        [
            "| objects | writes/s | hydrate | write→standby median / p95 / max | age median / p95 | RPO | RPO steps "
            "| RTO | cold restore | load |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {figures['seeded']} | {figures['writes_per_s']} | {figures['hydrated_s']} s | "
            f"{e2e['median']} / {e2e['p95']} / {e2e['max']} s | {age['median']} / {age['p95']} s | {fo['rpo_s']} s | "
            f"{fo['rpo_steps']} | {fo['rto_s']} s | {figures['cold_restore_s']} s | {figures['load_during']} |",
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
