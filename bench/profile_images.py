"""Where the CPU of an image copy goes: the images plugin's ``drtool backup`` and ``drtool restore`` each
sampled by py-spy, next to unprofiled runs of the same commands, sorted into the categories of
bench/profile_checkpoints.py.

bench/images.py measures drtool against ``crane copy``; this says what each of drtool's two legs spends its
CPU on (the same image: ``--layers`` random layers, ``--size-mib`` in all, in a lab registry; each backup a
fresh local store, each restore a fresh empty target registry).

    pip install py-spy      # not a drtool dependency: only the profiles use it
    nice python bench/profile_images.py --size-mib 512
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
from profile_checkpoints import backup_id_in, py_spy_path, sampled, table

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
        base = [sys.executable, "-m", "drtool", "--config", str(config)]
        legs: dict[str, dict[str, Any]] = {"backup": {}, "restore": {}}
        for run in ("measured", "sampled"):  # a store each: a second backup into one store would dedupe
            store = args.workdir / f"store-{run}"
            shutil.rmtree(store, ignore_errors=True)
            subprocess.run([*base, "init", "--store", str(store)], env=env, check=True, capture_output=True)
            drtool = [*base, "--store", str(store)]
            argv = [*drtool, "backup", "-p", "images", "--json"]
            if run == "measured":
                wall, rss, out, cpu = popen_measured(argv, env)
                legs["backup"] |= {"wall_s": wall, "cpu_s": cpu, "rss": rss}
                backup_id = backup_id_in(out)
            else:
                legs["backup"] |= sampled(py_spy, args.workdir / "backup.raw", argv, env, args.rate)
                backup_id = backup_id_in(legs["backup"].pop("stdout"))
            target_lab, target = fresh_registry(args.workdir / "labs", f"bench-target-{run}")
            try:
                argv = [*drtool, "restore", backup_id, "-p", "images", "-t", f"registry={target.host}", "--json"]
                if run == "measured":
                    wall, rss, _, cpu = popen_measured(argv, env)
                    legs["restore"] |= {"wall_s": wall, "cpu_s": cpu, "rss": rss}
                else:
                    legs["restore"] |= sampled(py_spy, args.workdir / "restore.raw", argv, env, args.rate)
                    legs["restore"].pop("stdout")
            finally:
                target_lab.down()
            shutil.rmtree(store, ignore_errors=True)
        result |= legs | {"load_after": load()}
        for leg, phase in legs.items():
            print(table(f"drtool {leg} -p images", phase, gib))
        print(f"\nload average: {result['load_before']:.1f} before, {result['load_after']:.1f} after")
        write_results("profile_images", result)
    finally:
        lab.down()
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
