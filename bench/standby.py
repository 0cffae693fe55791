"""Warm standby against the cold path, in one run (docs/standby.md, "Measured").

    python bench/standby.py [--objects 5000] [--writes-per-s 5] [--load-s 60] [--delete-after 3600]

A seeded primary (bare control plane: etcd + kube-apiserver, ``--objects`` objects) and an empty standby,
the store in MinIO. `drtool follow -p kubernetes` runs on the primary and `drtool standby` on the standby,
each in a thread of this process. Then:

1. **Hydration**: time until the standby applied the first full.
2. **Lag under write load**: a writer patches a counter ConfigMap ``--writes-per-s`` times a second for
   ``--load-s`` seconds (each write is one "step"); every second the standby's lag (store time of the
   newest link minus the newest applied) and its age (now minus the newest applied link's source time)
   are sampled: median, p95 and max.
3. **Failover**: the writer stops, the primary is stopped (its last write is the failure time), and
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
import statistics
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
from drtool.follow import FollowSession, run_follow
from drtool.plugin.manager import get_plugin
from drtool.points import Point
from drtool.repo.chains import ChainReader, build_chains, plan_point
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.standby.failover import failover
from drtool.standby.hydrate import Standby
from drtool.standby.state import StateStore

RESULTS_DIR = REPO / "bench" / "results"
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
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.core.patch_namespaced_config_map(COUNTER, NS, {"data": {"step": str(self.step + 1)}})
            self.step += 1
            self.last_write = time.time()
            self.stop.wait(1 / self.rate)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from kubernetes import client

    figures: dict[str, Any] = {"objects": args.objects, "writes_per_s": args.writes_per_s, "load_s": args.load_s}
    minio_lab = Lab("bench-minio", root=work / "labs")
    minio_lab.up(["minio"])
    labs: list[Lab] = [minio_lab]
    try:
        minio = minio_lab["minio"]
        assert isinstance(minio, MinioServer)
        os.environ.update(minio.env())
        bucket = f"standby-{uuid.uuid4().hex[:8]}"
        minio.create_bucket(bucket)
        repo = Repository.init(open_backend(f"s3://{bucket}/store"), passphrase="bench-only-passphrase")
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
        session = FollowSession(repo, PLUGIN, SET, {"period": args.period})
        follower = threading.Thread(
            target=run_follow,
            args=(repo, get_plugin(PLUGIN), {"kubeconfig": str(_kube(primary).admin_kubeconfig)}, session),
            daemon=True,
        )
        t0 = time.monotonic()
        follower.start()
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
        lags, ages, loads = [], [], []
        end = time.monotonic() + args.load_s
        while time.monotonic() < end:
            time.sleep(1.0)
            lag = standby.metrics.lag(SET)
            if lag is not None:
                lags.append(lag)
            link_time = (standby.record.plugins.get(PLUGIN) or {}).get("link_time")
            if link_time:
                ages.append(time.time() - dt.datetime.fromisoformat(link_time.replace("Z", "+00:00")).timestamp())
            loads.append(load())
        writer.stop.set()
        writer.join()
        figures["lag_s"] = {"median": _pct(lags, 0.5), "p95": _pct(lags, 0.95), "max": _pct(lags, 1.0)}
        figures["age_s"] = {"median": _pct(ages, 0.5), "p95": _pct(ages, 0.95), "max": _pct(ages, 1.0)}
        figures["steps_written"] = writer.step
        figures["load_during"] = round(statistics.mean(loads), 1) if loads else None
        failed_at = dt.datetime.fromtimestamp(writer.last_write, dt.UTC)
        time.sleep(args.period)  # the follower's period: a real failure lands anywhere in it (RPO below says)
        url = _kube(primary).url
        session.stop.set()
        follower.join(60)
        stop_rounds.set()
        rounds.join(60)
        primary.down()
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
        for lab in reversed(labs):
            lab.down()
    return figures


def summarize(figures: dict[str, Any]) -> str:
    fo = figures["failover"]
    return "\n".join(
        [
            "| objects | writes/s | hydrate | lag median / p95 / max | age median / p95 | RPO | RPO steps | RTO | cold "
            "restore | load |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {figures['seeded']} | {figures['writes_per_s']} | {figures['hydrated_s']} s | "
            f"{figures['lag_s']['median']} / {figures['lag_s']['p95']} / {figures['lag_s']['max']} s | "
            f"{figures['age_s']['median']} / {figures['age_s']['p95']} s | {fo['rpo_s']} s | {fo['rpo_steps']} | "
            f"{fo['rto_s']} s | {figures['cold_restore_s']} s | {figures['load_during']} |",
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
