"""Kubernetes continuous backup under a steady write load: delta lag, objects/s followed, follower CPU.

On a bare lab control plane (etcd + kube-apiserver) and a local store (docs/kubernetes.md, "Continuous
backup"): ``drtool follow -p kubernetes --period P`` runs as its own process while a load thread writes
``--rate`` ConfigMap operations/s (creates over a growing key set; every 3rd op an update, every 10th a
delete), remembering when the API server acknowledged each (key, resourceVersion). Afterwards every event
of every delta is matched to its write: **lag** = the delta's manifest ``finished`` time (the link is
durable) minus the write's acknowledgement. The follower's CPU (utime+stime) comes from /proc.

    python bench/kube_follow.py                         # --rates 20,100 --seconds 60 --period 5
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drtool_lab.lab import BARE_KINDS, Lab

from bench.machine import machine_facts, write_results
from drtool.backends.local import LocalBackend
from drtool.kube.client import KubeClient
from drtool.kube.deltas import read_delta
from drtool.kube.objects import dumps
from drtool.kube.settings import Connection
from drtool.points import parse_time
from drtool.repo.repository import Repository
from drtool.repo.restore_context import PluginRestoreContext

PASSPHRASE = "bench-kube-follow-passphrase"
CM = "/api/v1/namespaces/load/configmaps"


class Load(threading.Thread):
    def __init__(self, client: KubeClient, rate: float) -> None:
        super().__init__(daemon=True)
        self.client, self.rate = client, rate
        self.stop_event = threading.Event()
        self.acked: dict[tuple[str, str], float] = {}  # (key, resourceVersion) -> wall time acknowledged
        self.ops = self.errors = 0

    def run(self) -> None:
        i, live = 0, []
        started = time.monotonic()
        while not self.stop_event.is_set():
            delay = started + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                if i % 10 == 9 and live:
                    name = live.pop(0)
                    answer = self.client.request("DELETE", f"{CM}/{name}").json()
                elif i % 3 == 2 and live:
                    name = live[-1]
                    body = dumps({"data": {"v": str(i)}})
                    answer = self.client.request(
                        "PATCH", f"{CM}/{name}", body=body, content_type="application/merge-patch+json"
                    ).json()
                else:
                    name = f"cm-{i}"
                    body = dumps({"metadata": {"name": name}, "data": {"v": "0", "pad": "x" * 512}})
                    answer = self.client.request("POST", CM, body=body).json()
                    live.append(name)
                rv = str((answer.get("metadata") or {}).get("resourceVersion") or "")
                self.acked[(f"load/{name}", rv)] = time.time()
                self.ops += 1
            except Exception:  # counted: a bench keeps going
                self.errors += 1
            i += 1


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(work: Path, rate: float, period: float, seconds: float) -> dict[str, Any]:
    lab = Lab(f"kfollow-{int(rate)}", root=work / "labs")
    lab.add("etcd")
    lab.add("kube-apiserver")
    lab.up(BARE_KINDS)
    try:
        kubeconfig = str(lab["kube-apiserver"].admin_kubeconfig)
        client = KubeClient(Connection(kubeconfig=kubeconfig))
        client.request("POST", "/api/v1/namespaces", body=dumps({"metadata": {"name": "load"}}))
        store = work / f"store-{int(rate)}"
        repo = Repository.init(LocalBackend(store), passphrase=PASSPHRASE)
        home = work / f"home-{int(rate)}"
        (home / ".config/drtool").mkdir(parents=True, exist_ok=True)
        config = {"store": str(store), "sources": {"kubernetes": {"kubeconfig": kubeconfig}}}
        (home / ".config/drtool/config.yaml").write_text(json.dumps(config))
        env = {**os.environ, "HOME": str(home), "DRTOOL_PASSPHRASE": PASSPHRASE, "DRTOOL_CATALOG": str(home / "c.db")}
        log = open(work / f"follow-{int(rate)}.log", "w")  # noqa: SIM115 -- closed below
        follower = subprocess.Popen(
            [sys.executable, "-m", "drtool", "follow", "-p", "kubernetes", "--period", str(period)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        while not repo.backup_ids():  # the full first
            time.sleep(0.5)
        cpu_before = proc_cpu(follower.pid)
        load = Load(client, rate)
        load.start()
        started = time.monotonic()
        time.sleep(seconds)
        load.stop_event.set()
        load.join()
        elapsed = time.monotonic() - started
        time.sleep(period + 3)
        cpu = proc_cpu(follower.pid) - cpu_before
        follower.send_signal(signal.SIGTERM)
        follower.wait(timeout=120)
        log.close()
    finally:
        lab.down()
    lags, events = [], 0
    for backup_id in repo.backup_ids():
        manifest = repo.get_manifest(backup_id)
        if not manifest.is_delta:
            continue
        durable = parse_time(manifest.finished).timestamp()
        for event in read_delta(PluginRestoreContext(repo, manifest, "kubernetes"))[1]:
            events += 1
            acked = load.acked.get((event.key, event.rv))
            if acked is not None:
                lags.append(durable - acked)
    lags.sort()
    return {
        "rate_asked": rate,
        "period_s": period,
        "seconds": round(elapsed, 1),
        "ops": load.ops,
        "ops_per_s": round(load.ops / elapsed, 1),
        "load_errors": load.errors,
        "events_in_deltas": events,
        "writes_matched": len(lags),
        "lag_p50_s": round(statistics.median(lags), 2) if lags else None,
        "lag_p95_s": round(lags[int(0.95 * (len(lags) - 1))], 2) if lags else None,
        "lag_max_s": round(lags[-1], 2) if lags else None,
        "follower_cpu_s": round(cpu, 1),
        "follower_cpu_pct": round(100 * cpu / (elapsed + period + 3), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="20,100", help="write operations per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=5.0)
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine_facts(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="drtool-kfollow-") as tmp:
        for rate in (float(r) for r in args.rates.split(",")):
            results["runs"].append(run(Path(tmp), rate, args.period, args.seconds))
            print(json.dumps(results["runs"][-1]), flush=True)
    print(write_results("kube_follow", results))


if __name__ == "__main__":
    main()
