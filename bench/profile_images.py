"""Where the CPU of an image backup goes: the images plugin's ``drtool backup`` sampled by py-spy, next to an
unprofiled run of the same backup, sorted into the categories of bench/profile_checkpoints.py.

bench/images.py measures drtool against ``skopeo copy``; this says what the backup leg, the larger of
drtool's two, spends its CPU on (the same image: ``--layers`` random layers, ``--size-mib`` in all, in a lab
registry; each run a fresh local store).

    pip install py-spy      # not a drtool dependency: only the profiles use it
    nice python bench/profile_images.py --size-mib 1024
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from images import REPO, TAG, _env, fresh_registry, make_layers, push_big_image
from machine import load, machine_facts, popen_measured, write_results
from profile_checkpoints import py_spy_path, sampled, table

from drtool.plugin.toolkit.oci.registry import Registry

GiB = 1 << 30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/drtool-bench-profile-images"))
    args = ap.parse_args()
    py_spy = py_spy_path()
    args.workdir.mkdir(parents=True, exist_ok=True)
    layers = make_layers(args.workdir, args.size_mib, args.layers)
    lab, source = fresh_registry(args.workdir / "labs", "bench-source")
    gib = args.size_mib / 1024
    result: dict[str, Any] = {"machine": machine_facts(), "size_mib": args.size_mib, "load_before": load()}
    try:
        push_big_image(Registry(source.host), layers)
        config = args.workdir / "config.yaml"
        config.write_text(json.dumps({"sources": {"images": {"images": [f"{source.host}/{REPO}:{TAG}"]}}}))
        env = _env(args.workdir)
        phase: dict[str, Any] = {}
        for run in ("measured", "sampled"):  # a store each: a second backup into one store would dedupe
            store = args.workdir / f"store-{run}"
            shutil.rmtree(store, ignore_errors=True)
            base = [sys.executable, "-m", "drtool", "--config", str(config)]
            subprocess.run([*base, "init", "--store", str(store)], env=env, check=True, capture_output=True)
            argv = [*base, "--store", str(store), "backup", "-p", "images", "--json"]
            if run == "measured":
                wall, rss, _, cpu = popen_measured(argv, env)
                phase |= {"wall_s": wall, "cpu_s": cpu, "rss": rss}
            else:
                phase |= sampled(py_spy, args.workdir / "backup.raw", argv, env, args.rate)
                phase.pop("stdout")
            shutil.rmtree(store, ignore_errors=True)
        result |= {"backup": phase, "load_after": load()}
        print(table("drtool backup -p images", phase, gib))
        print(f"\nload average: {result['load_before']:.1f} before, {result['load_after']:.1f} after")
        write_results("profile_images", result)
    finally:
        lab.down()
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
