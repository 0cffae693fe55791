"""etcd continuous backup under a steady write load: RPO, follower cost, bytes per hour, PITR restore time.

Measures, on a real etcd (drtool's lab component) and a local store (docs/performance.md, "etcd
continuous backup"):

1. **Follow** (`--follow-s`, per period in `--periods`): ``drtool follow -p etcd`` as its own process while a
   load thread writes ``--rate`` operations/s (1 KiB puts over a key set, every 10th op a delete, every
   100th op a new 30 s lease that the next 10 puts use, and leases revoked in turn). Every second the age of the
   newest durable delta is sampled (the RPO if the source died at that instant); at the end etcd is killed
   with SIGKILL and the age at that moment is the run's "RPO at kill". The follower's CPU (utime+stime) and
   peak RSS come from /proc. Bytes stored per hour = the deltas' stored bytes / the run's time.
2. **Restore time 1 h after the last full** (`--simulated-hours`, `--rate`): the hour's volume of deltas is
   synthesized (consistent create/mod revisions, versions and prev_kv, 4000 revisions per delta, as the
   follower writes them at 200 ops/s and 20 s) on top of a real full snapshot of a real etcd holding the
   key set, written through the same ``FollowSession``; then ``drtool restore --at latest`` (full + replay)
   is timed, then the chain is folded (``drtool compact``, timed) and the folded full restored (timed).

Gardener's etcdbrctl (the reference) is not run: the Go module proxy refuses
github.com/gardener/etcd-backup-restore (403 "not available"); docs/performance.md compares against its
published figures instead.

    python bench/etcd_follow.py                        # --rate 200 --follow-s 120 --periods 20,5 --simulated-hours 1
    python bench/etcd_follow.py --simulated-hours 0.1  # a shorter replay, extrapolated
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import http.client
import json
import os
import shutil
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

from drtool_lab.lab import Lab

from bench.machine import machine_facts
from drtool.backends.local import LocalBackend
from drtool.compact import compact
from drtool.follow import FollowSession
from drtool.plugin.contract import Span
from drtool.plugin.manager import get_plugin
from drtool.repo.chains import find_point
from drtool.repo.repository import Repository
from drtool.restore import run_restore
from drtool.servers.etcd import EtcdServer

PASSPHRASE = "bench etcd follow"
KEYS = 2000
VALUE = 1024
REVS_PER_DELTA = 4000  # 200 ops/s for 20 s


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Gateway:
    """http.client to etcd's gateway: cheap enough that the load thread keeps its rate on 2 cores."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        return json.loads(self.conn.getresponse().read())


class Load(threading.Thread):
    """``rate`` writes/s: puts of 1 KiB, a delete every 10th, a 30 s lease every 100th (used by 10 puts)."""

    def __init__(self, port: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.port, self.rate = port, rate
        self.stop_event = threading.Event()
        self.ops = 0
        self.errors = 0

    def run(self) -> None:
        gw = Gateway(self.port)
        lease, leased_left, started = 0, 0, time.monotonic()
        while not self.stop_event.is_set():
            due = started + self.ops / self.rate
            if (wait := due - time.monotonic()) > 0:
                time.sleep(wait)
            i = self.ops
            try:
                if i % 100 == 99:
                    if lease:
                        gw.call("/v3/lease/revoke", {"ID": lease})
                    lease, leased_left = int(gw.call("/v3/lease/grant", {"TTL": 30})["ID"]), 10
                elif i % 10 == 9:
                    gw.call("/v3/kv/deleterange", {"key": b64(f"/bench/{(i * 7) % KEYS:05d}".encode())})
                else:
                    body: dict[str, Any] = {
                        "key": b64(f"/bench/{i % KEYS:05d}".encode()),
                        "value": b64(os.urandom(VALUE)),
                    }
                    if leased_left:
                        body["lease"], leased_left = lease, leased_left - 1
                    gw.call("/v3/kv/put", body)
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                self.errors += 1
                time.sleep(0.2)
                with contextlib.suppress(OSError):
                    gw = Gateway(self.port)
            self.ops += 1


def proc_usage(pid: int) -> tuple[float, int]:
    """CPU seconds (user+system) and peak RSS bytes of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmHWM")
    )
    return cpu, hwm * 1024


def newest_delta_time(repo: Repository) -> dt.datetime | None:
    for manifest in repo.manifests_newest_first(repo.backup_ids()):
        if manifest.is_delta and manifest.chain is not None:
            return dt.datetime.fromisoformat(manifest.chain.last_time)
    return None


def start_etcd(root: Path, name: str) -> tuple[Lab, EtcdServer]:
    lab = Lab(name, root=root)
    server = lab.add("etcd", name="etcd", tls=False)
    assert isinstance(server, EtcdServer)
    server.start()
    lab.save()
    return lab, server


def new_store(path: Path) -> Repository:
    return Repository.init(LocalBackend(path), passphrase=PASSPHRASE)


def follow_run(work: Path, rate: float, period: float, seconds: float) -> dict[str, Any]:
    lab, etcd = start_etcd(work / "labs", f"follow-{int(period)}")
    store = work / f"store-follow-{int(period)}"
    repo = new_store(store)
    home = work / f"home-{int(period)}"
    (home / ".config/drtool").mkdir(parents=True, exist_ok=True)
    config = home / ".config/drtool/config.yaml"
    config.write_text(json.dumps({"store": str(store), "sources": {"etcd": {"endpoints": etcd.client_url}}}))
    env = {**os.environ, "HOME": str(home), "DRTOOL_PASSPHRASE": PASSPHRASE, "DRTOOL_CATALOG": str(home / "c.db")}
    load = Load(etcd.client_port, rate)
    load.start()
    follower = subprocess.Popen(
        [sys.executable, "-m", "drtool", "follow", "-p", "etcd", "--period", str(period)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / f"follow-{int(period)}.log", "w"),  # noqa: SIM115 -- closed with the process
    )
    samples: list[float] = []
    cpu = rss = 0.0
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            time.sleep(1.0)
            newest = newest_delta_time(repo)
            if newest is not None:
                samples.append((dt.datetime.now(dt.UTC) - newest).total_seconds())
            cpu, peak = proc_usage(follower.pid)
            rss = max(rss, peak)
        os.kill(etcd.pid or 0, signal.SIGKILL)  # the source dies
        killed = dt.datetime.now(dt.UTC)
        etcd.pid = None
        durable = newest_delta_time(repo)  # if the follower died with it, this is what the store holds
        rpo_at_kill = (killed - durable).total_seconds() if durable else None
        time.sleep(period + 2)  # the surviving follower writes what it had read before the kill
        flushed = newest_delta_time(repo)
        rpo_follower_survives = (killed - flushed).total_seconds() if flushed else None
    finally:
        load.stop_event.set()
        follower.send_signal(signal.SIGTERM)
        follower.wait(timeout=120)
        lab.down()
    elapsed = time.monotonic() - started
    manifests = [repo.get_manifest(i) for i in repo.backup_ids()]
    deltas = [m for m in manifests if m.is_delta]
    stored = sum(m.stats.get("bytes_stored", 0) for m in deltas)
    steady = samples[len(samples) // 4 :] or samples  # after the first full and the first delta
    return {
        "period_s": period,
        "seconds": round(elapsed, 1),
        "ops": load.ops,
        "ops_per_s": round(load.ops / elapsed, 1),
        "load_errors": load.errors,
        "deltas": len(deltas),
        "revisions": sum(m.plugins["etcd"].meta["revisions"] for m in deltas),
        "rpo_at_kill_s": round(rpo_at_kill, 1) if rpo_at_kill is not None else None,
        "rpo_follower_survives_s": round(rpo_follower_survives, 1) if rpo_follower_survives is not None else None,
        "rpo_mean_s": round(statistics.mean(steady), 1) if steady else None,
        "rpo_max_s": round(max(steady), 1) if steady else None,
        "follower_cpu_s": round(cpu, 1),
        "follower_cpu_pct": round(100 * cpu / elapsed, 1),
        "follower_peak_rss_mib": round(rss / 2**20, 1),
        "delta_bytes_stored": stored,
        "delta_bytes_stored_per_hour": round(stored * 3600 / elapsed),
        "full_bytes_stored": sum(m.stats.get("bytes_stored", 0) for m in manifests if not m.is_delta),
    }


class Synth:
    """Consistent watch events for a key set: create/mod revisions, versions and prev mod revisions."""

    def __init__(self, keys: dict[bytes, tuple[int, int, int]], revision: int) -> None:
        self.keys = keys  # key -> (create, mod, version)
        self.revision = revision
        self.i = 0

    def next_line(self, when: str) -> bytes:
        self.revision += 1
        rev, i = self.revision, self.i
        self.i += 1
        if i % 10 == 9 and self.keys:
            key = f"/bench/{(i * 7) % KEYS:05d}".encode()
            old = self.keys.pop(key, None)
            if old is None:  # nothing to delete: etcd would not make a revision of it; put instead
                return self._put(key, rev, when)
            op = {"o": "d", "k": b64(key), "pm": old[1]}
            return json.dumps({"r": rev, "t": when, "ops": [op]}, separators=(",", ":")).encode() + b"\n"
        return self._put(f"/bench/{i % KEYS:05d}".encode(), rev, when)

    def _put(self, key: bytes, rev: int, when: str) -> bytes:
        old = self.keys.get(key)
        create, version = (old[0], old[2] + 1) if old else (rev, 1)
        self.keys[key] = (create, rev, version)
        op: dict[str, Any] = {"o": "p", "k": b64(key), "v": b64(os.urandom(VALUE)), "c": create, "n": version}
        if old:
            op["pm"] = old[1]
        return json.dumps({"r": rev, "t": when, "ops": [op]}, separators=(",", ":")).encode() + b"\n"


def replay_run(work: Path, rate: float, hours: float) -> dict[str, Any]:
    """A real full snapshot of a real etcd with the key set, then ``hours`` of synthesized deltas."""
    lab, etcd = start_etcd(work / "labs", "replay")
    repo = new_store(work / "store-replay")
    gw = Gateway(etcd.client_port)
    for k in range(KEYS):
        gw.call("/v3/kv/put", {"key": b64(f"/bench/{k:05d}".encode()), "value": b64(os.urandom(VALUE))})
    plugin = get_plugin("etcd")
    session = FollowSession(repo, "etcd", "follow")
    from drtool_plugins.etcd import backup as etcd_backup  # the plugin's own snapshot code

    source = {"endpoints": etcd.client_url}
    tip = session.write_full(
        lambda ctx: (m := etcd_backup.backup(source, ctx), Span(None, int(m["revision"]), None, now_text()))
    )
    keys: dict[bytes, tuple[int, int, int]] = {}
    for kv in _all_kvs(gw):
        keys[base64.b64decode(kv["key"])] = (int(kv["create_revision"]), int(kv["mod_revision"]), int(kv["version"]))
    lab.down()
    synth = Synth(keys, tip.link.last)
    total = int(rate * 3600 * hours)
    clock = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    while synth.i < total:
        count = min(REVS_PER_DELTA, total - synth.i)
        first = synth.revision + 1
        clock += dt.timedelta(seconds=count / rate)
        when = clock.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [synth.next_line(when) for _ in range(count)]
        tip = session.write_delta(tip, _writer(lines, first, synth.revision, when))
    synth_s = time.monotonic() - t0
    target_root = work / "restores"
    result: dict[str, Any] = {"simulated_hours": hours, "revisions": total, "deltas": session.links_written - 1}
    result["synthesize_s"] = round(synth_s, 1)
    t0 = time.monotonic()
    outcome = run_restore(repo, find_point(repo, "etcd", "latest", "latest"), plugin, _target(target_root, "pitr"))
    result["pitr_restore_s"] = round(time.monotonic() - t0, 1)
    result["pitr_verified"] = outcome.verified
    result["replayed_revisions_per_s"] = round(total / max(result["pitr_restore_s"], 0.001))
    _stop(outcome)
    t0 = time.monotonic()
    folded = compact(repo, plugin, options={"workdir": str(work)})
    result["fold_s"] = round(time.monotonic() - t0, 1)
    assert folded.manifest is not None
    t0 = time.monotonic()
    full = run_restore(repo, folded.manifest, plugin, _target(target_root, "full"))
    result["full_restore_s"] = round(time.monotonic() - t0, 1)
    result["full_verified"] = full.verified
    result["full_failed_checks"] = [f"{c.name}: {c.detail}" for c in full.checks if not c.ok]
    result["folded_full_bytes"] = folded.manifest.size
    _stop(full)
    return result


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _all_kvs(gw: Gateway) -> list[dict[str, Any]]:
    body = {"key": b64(b"\0"), "range_end": b64(b"\0")}
    return gw.call("/v3/kv/range", body).get("kvs", [])


def _writer(lines: list[bytes], first: int, last: int, when: str) -> Any:
    from drtool_plugins.etcd.deltas import ARTIFACT, header

    def write(ctx: Any) -> tuple[dict[str, Any], Span]:
        with ctx.artifact(ARTIFACT, sensitive=True) as sink:
            sink.write(header("bench", first, last, len(lines), {}))
            for line in lines:
                sink.write(line)
        meta = {
            "kind": "etcd-delta",
            "cluster_id": "bench",
            "first_revision": first,
            "last_revision": last,
            "revisions": len(lines),
        }
        return meta, Span(first, last, when, when)

    return write


def _target(root: Path, name: str) -> dict[str, Any]:
    return {"data_dir": str(root / name / "data"), "name": name, "start": True, "lab_dir": str(root / f"{name}-lab")}


def _stop(outcome: Any) -> None:
    server = outcome.result.details.get("server")
    if server:
        EtcdServer.from_state(dict(server)).stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0, help="write operations per second")
    parser.add_argument("--follow-s", type=float, default=120.0, help="seconds each follow run lasts")
    parser.add_argument("--periods", default="20,5", help="delta periods to run, seconds")
    parser.add_argument("--simulated-hours", type=float, default=1.0, help="hours of deltas replayed (0: skip)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="drtool-etcd-follow-"))
    results: dict[str, Any] = {"machine": machine_facts(), "rate": args.rate, "follow": [], "replay": None}
    try:
        for period in (float(p) for p in args.periods.split(",") if p):
            run = follow_run(work, args.rate, period, args.follow_s)
            print(json.dumps(run), flush=True)
            results["follow"].append(run)
        if args.simulated_hours > 0:
            results["replay"] = replay_run(work, args.rate, args.simulated_hours)
            print(json.dumps(results["replay"]), flush=True)
    finally:
        out = Path(__file__).parent / "results" / f"etcd_follow-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(results, indent=1))
        print(f"results: {out}")
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
