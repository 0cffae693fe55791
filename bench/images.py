"""Image copy: drtool (backup into a store, then restore into a registry) against ``crane copy`` and ``skopeo
copy``, registry to registry, on the same 1 GiB multi-layer image, machine and registries.

drtool makes two trips through an encrypted, deduplicating store where a copier makes one: the ratio of the
two together is the headline, and each trip alone against the copy is printed too.

    nice python bench/images.py [--size-mib 1024] [--layers 8] [--runs 3] [--reference crane --reference skopeo]

Two real registries (distribution v3, drtool's lab component) on loopback: the source holds one
image of ``--layers`` layers of random (incompressible) bytes, ``--size-mib`` in all, pushed once. Each run,
for each tool, starts a FRESH, empty target registry (and for drtool a fresh local store), then:
- drtool: ``backup`` (images plugin: source registry -> encrypted, compressed, chunked store) and ``restore``
  (store -> target registry, verified by reading the manifests back); wall times of both, and their sum;
- crane (``github.com/google/go-containerregistry`` v0.22.1, built once by this script with ``go install``
  into drtool's binary cache, ``drtool_lab.build.go_binary``): ``crane copy --insecure`` source -> target;
- skopeo (Debian's, when installed): ``skopeo copy --all --preserve-digests`` source -> target.
The references copy directly (no store in between) and must keep the manifest's digest. Every command is
its own process (drtool's real CLI: ``drtool backup``, ``drtool restore``), reaped with ``wait4`` for its
peak RSS and CPU time (``store_throughput.measure``). The tools alternate who goes first; the ratio
drtool / reference (wall and CPU) is taken pair by pair, run by run. Medians of ``--runs``. Raw results go
to ``bench/results/`` (git-ignored); a Markdown table and the ratios are printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from drtool_lab.components.registry import RegistryServer
from drtool_lab.lab import Lab
from drtool_plugins.images.sample import CONFIG, LAYER
from machine import machine_facts
from store_throughput import Measurement, measure

from drtool.plugin.toolkit.oci.registry import OCI_MANIFEST, Registry, sha256_digest

MiB = 1 << 20
SEED = 20261129
PASSPHRASE = "images-bench"  # a throwaway store; not a secret
RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO, TAG = "bench/big", "1"
FLOOR_REPO = "bench/floor"  # ``--floor``: one layer of 1 KiB, what drtool's two processes cost at no data


def workdir_file(path: Path, size: int) -> Path:
    """``size`` seeded random bytes at ``path`` (kept when already there)."""
    if not (path.exists() and path.stat().st_size == size):
        path.write_bytes(random.Random(SEED + size).randbytes(size))
    return path


def make_layers(workdir: Path, size_mib: int, layers: int) -> list[Path]:
    """``layers`` files of random bytes, ``size_mib`` in all; reused when already there with the same sizes."""
    each = size_mib * MiB // layers
    paths = []
    rng = random.Random(SEED)
    for i in range(layers):
        path = workdir / f"layer{i}.bin"
        if not (path.exists() and path.stat().st_size == each):
            with open(path, "wb") as f:
                for _ in range(each // MiB):
                    f.write(rng.randbytes(MiB))
        paths.append(path)
    return paths


def _file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(MiB):
            yield chunk


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    for chunk in _file_chunks(path):
        h.update(chunk)
    return "sha256:" + h.hexdigest()


def push_big_image(reg: Registry, layers: list[Path], repo: str = REPO) -> str:
    descs = []
    for path in layers:
        digest = _file_digest(path)
        if not reg.has_blob(repo, digest):
            reg.push_blob(repo, digest, _file_chunks(path))
        descs.append({"mediaType": LAYER, "digest": digest, "size": path.stat().st_size})
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    config_b = config.encode()
    reg.push_blob(repo, sha256_digest(config_b), [config_b])
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": CONFIG, "digest": sha256_digest(config_b), "size": len(config_b)},
        "layers": descs,
    }
    data = json.dumps(manifest).encode()
    reg.put_manifest(repo, TAG, data, OCI_MANIFEST)
    return sha256_digest(data)


def fresh_registry(root: Path, name: str) -> tuple[Lab, RegistryServer]:
    lab = Lab(name, root=root)
    lab.up(["registry"])
    server = lab["registry"]
    assert isinstance(server, RegistryServer)
    return lab, server


def _env(workdir: Path) -> dict[str, str]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return env | {"HOME": str(home), "DRTOOL_PASSPHRASE": PASSPHRASE, "DRTOOL_CATALOG": str(home / "catalog.db")}


def _row(m: Measurement) -> dict[str, float]:
    return {"s": m.seconds, "peak_rss_mib": m.peak_rss_kib / 1024, "cpu_s": m.cpu_seconds, "load": m.loadavg_1m}


def run_drtool(workdir: Path, root: Path, source: str, run: int, digest: str, repo: str = REPO) -> dict[str, Any]:
    """``drtool backup`` then ``drtool restore`` (the CLI, each its own process) into a fresh store and registry."""
    store, config, env = workdir / f"store-{run}", workdir / "config.yaml", _env(workdir)
    shutil.rmtree(store, ignore_errors=True)
    config.write_text(json.dumps({"sources": {"images": {"images": [f"{source}/{repo}:{TAG}"]}}}))
    base = [sys.executable, "-m", "drtool", "--config", str(config)]
    subprocess.run([*base, "init", "--store", str(store)], env=env, check=True, capture_output=True)
    drtool = [*base, "--store", str(store)]
    lab, target = fresh_registry(root, f"bench-drtool-{repo.rsplit('/', 1)[-1]}-{run}")
    try:
        backup = measure([*drtool, "backup", "-p", "images", "--json"], env, workdir / f"drtool-backup-{run}", "drtool")
        backup_id = json.loads((workdir / f"drtool-backup-{run}.out").read_text())["id"]
        argv = [*drtool, "restore", backup_id, "-p", "images", "-t", f"registry={target.host}", "--json"]
        restore = measure(argv, env, workdir / f"drtool-restore-{run}", "drtool")
        assert Registry(target.host).manifest_digest(repo, TAG) == digest
        store_bytes = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
        return {
            "backup": _row(backup),
            "restore": _row(restore),
            "total_s": backup.seconds + restore.seconds,
            "store_bytes": store_bytes,
        }
    finally:
        lab.down()
        shutil.rmtree(store, ignore_errors=True)


CRANE = ("crane", "github.com/google/go-containerregistry/cmd/crane", "v0.22.1")


def reference_argv(tool: str, source: str, target: str) -> list[str]:
    """The reference copier's command: source registry -> target registry, the manifest's digest kept."""
    src, dst = f"{source}/{REPO}:{TAG}", f"{target}/{REPO}:{TAG}"
    if tool == "crane":
        from drtool_lab.build import go_binary

        return [str(go_binary(*CRANE)), "copy", "--insecure", src, dst]  # built once, then cached
    # without --preserve-digests skopeo 1.9 rewrites the manifest (another digest)
    tls = ["--src-tls-verify=false", "--dest-tls-verify=false"]
    return ["skopeo", "copy", "--all", "--preserve-digests", *tls, f"docker://{src}", f"docker://{dst}"]


def run_reference(tool: str, workdir: Path, root: Path, source: str, run: int, digest: str) -> dict[str, Any]:
    lab, target = fresh_registry(root, f"bench-{tool}-{run}")
    try:
        copy = measure(reference_argv(tool, source, target.host), _env(workdir), workdir / f"{tool}-{run}", tool)
        assert Registry(target.host).manifest_digest(REPO, TAG) == digest, f"{tool} changed the digest"
        return {"copy": _row(copy), "total_s": copy.seconds}
    finally:
        lab.down()


def version(tool: str) -> str:
    argv = [reference_argv(tool, "a", "b")[0], "version" if tool == "crane" else "--version"]
    return subprocess.run(argv, capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/drtool-bench-images"))
    parser.add_argument("--reference", action="append", choices=["crane", "skopeo"], help="default: both")
    parser.add_argument(
        "--floor", action="store_true", help="each run, drtool on a 1 KiB image too: its fixed costs per process"
    )
    args = parser.parse_args()
    references = args.reference or ["crane", "skopeo"]
    if "skopeo" in references and not shutil.which("skopeo"):
        sys.exit("skopeo is not installed: apt-get install skopeo (or --reference crane)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    root = args.workdir / "labs"
    layers = make_layers(args.workdir, args.size_mib, args.layers)
    for tool in references:
        reference_argv(tool, "a", "b")  # builds crane before the first measurement
    src_lab, src = fresh_registry(root, "bench-source")
    results: dict[str, list[dict[str, Any]]] = {"drtool": [], **{tool: [] for tool in references}}
    try:
        digest = push_big_image(Registry(src.host), layers)
        floor = [workdir_file(args.workdir / "floor.bin", 1024)] if args.floor else []
        floor_digest = push_big_image(Registry(src.host), floor, FLOOR_REPO) if floor else ""
        for run in range(args.runs):
            order = ["drtool", *references] if run % 2 == 0 else [*references, "drtool"]
            for tool in order:
                if tool == "drtool":
                    results[tool].append(run_drtool(args.workdir, root, src.host, run, digest))
                else:
                    results[tool].append(run_reference(tool, args.workdir, root, src.host, run, digest))
                print(tool, run, results[tool][-1], file=sys.stderr)
            if args.floor:
                results.setdefault("drtool-floor", []).append(
                    run_drtool(args.workdir, root, src.host, run, floor_digest, FLOOR_REPO)
                )
    finally:
        src_lab.down()
    d_runs = results["drtool"]
    medians: dict[str, dict[str, float]] = {
        "drtool": {
            "backup_s": _median(d_runs, "backup", "s"),
            "restore_s": _median(d_runs, "restore", "s"),
            "total_s": _median(d_runs, "total_s"),
            "backup_peak_rss_mib": _median(d_runs, "backup", "peak_rss_mib"),
            "restore_peak_rss_mib": _median(d_runs, "restore", "peak_rss_mib"),
            "backup_cpu_s": _median(d_runs, "backup", "cpu_s"),
            "restore_cpu_s": _median(d_runs, "restore", "cpu_s"),
        }
    }
    ratios: dict[str, dict[str, float]] = {}
    for tool in references:
        runs = results[tool]
        medians[tool] = {
            "total_s": _median(runs, "total_s"),
            "peak_rss_mib": _median(runs, "copy", "peak_rss_mib"),
            "cpu_s": _median(runs, "copy", "cpu_s"),
        }
        pairs = list(zip(d_runs, runs, strict=True))
        ratios[tool] = {
            "wall": statistics.median(d["total_s"] / r["total_s"] for d, r in pairs),
            "cpu": statistics.median(
                (d["backup"]["cpu_s"] + d["restore"]["cpu_s"]) / r["copy"]["cpu_s"] for d, r in pairs
            ),
            # each of drtool's two trips alone against the reference's one (a copy is one trip, not two)
            **{
                f"{leg}_{unit}": statistics.median(d[leg][key] / r["copy"][key] for d, r in pairs)
                for leg in ("backup", "restore")
                for unit, key in (("wall", "s"), ("cpu", "cpu_s"))
            },
        }
    report: dict[str, Any] = {
        "bench": "images",
        "size_mib": args.size_mib,
        "layers": args.layers,
        "runs": results,
        "medians": medians,
        "ratios": ratios,
        "versions": {tool: version(tool) for tool in references},
        "machine": machine_facts(),
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS_DIR / f"images-{stamp}.json").write_text(json.dumps(report, indent=2))
    size, d = args.size_mib, medians["drtool"]
    print("| tool | backup s | restore s | total s | MiB/s (total) | CPU s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    cpu = d["backup_cpu_s"] + d["restore_cpu_s"]
    rss = max(d["backup_peak_rss_mib"], d["restore_peak_rss_mib"])
    print(
        f"| drtool | {d['backup_s']:.1f} | {d['restore_s']:.1f} | {d['total_s']:.1f} | "
        f"{size / d['total_s']:.0f} | {cpu:.1f} | {rss:.0f} |"
    )
    for tool in references:
        r = medians[tool]
        print(
            f"| {tool} copy | - | - | {r['total_s']:.1f} | {size / r['total_s']:.0f} | {r['cpu_s']:.1f} | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    if args.floor:
        f = results["drtool-floor"]
        print(
            f"drtool on a 1 KiB image (fixed costs): backup {_median(f, 'backup', 's'):.1f} s, "
            f"{_median(f, 'backup', 'cpu_s'):.2f} CPU-s; restore {_median(f, 'restore', 's'):.1f} s, "
            f"{_median(f, 'restore', 'cpu_s'):.2f} CPU-s"
        )
    for tool, ratio in ratios.items():
        print(f"drtool / {tool}: {ratio['wall']:.2f}x wall, {ratio['cpu']:.2f}x CPU (medians of per-run pairs)")
        for leg in ("backup", "restore"):
            print(f"  drtool {leg} alone / {tool}: {ratio[leg + '_wall']:.2f}x wall, {ratio[leg + '_cpu']:.2f}x CPU")


def _median(runs: list[dict[str, Any]], key: str, sub: str | None = None) -> float:
    return statistics.median((r[key][sub] if sub else r[key]) for r in runs)


if __name__ == "__main__":
    main()
