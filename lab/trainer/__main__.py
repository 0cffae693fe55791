"""`python -m drtool_lab.trainer train|resume|reference`: the lab's training job, run as a process.

kwok pods run no code, so the lab runs training as a plain process against its MinIO (and, for the
``training-resumes`` check's Job, the lab's node runs it from the pod: lab/node.py). The location is the JSON
mapping in ``DRTOOL_CHECKPOINTS`` (``url: s3://BUCKET/PREFIX`` plus ``endpoint_url`` and ``credentials_file``,
or the keys in the usual ``AWS_*`` variables) and the run's folder in it ``DRTOOL_CHECKPOINTS_FOLDER``: what the
check's Job sets (docs/plans.md). Reports are JSON files (the check's Job names its termination log); losses
are written with ``float.hex`` so that equal means equal.

- ``train --until N --every K [--pause-in-save S]``: continue from the newest complete checkpoint (or
  step 0) to step N, saving every K steps. With ``--pause-in-save S`` the save of step S stops after its
  second shard, says so on stdout and waits to be killed: a torn checkpoint on demand.
- ``resume --steps K --report FILE``: what a restored job does: load the newest complete checkpoint and
  train K steps without saving; reports the step it resumed from, the digest of the parameters it loaded
  and the losses.
- ``reference --until N --digest-at S --report FILE``: an uninterrupted run from step 0 to N, kept in
  memory; reports the parameters' digest at step S and the losses after S (a termination message holds
  4 KiB).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread before numpy loads: every step reproducible bit for bit

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from drtool_lab.trainer import checkpoint, model  # noqa: E402

PAUSE_AFTER_SHARD = 2


def _location() -> tuple[checkpoint.Bucket, str]:
    raw = os.environ.get("DRTOOL_CHECKPOINTS")
    if not raw:
        sys.exit("trainer: DRTOOL_CHECKPOINTS (a JSON location: url, endpoint_url, credentials_file) is not set")
    return checkpoint.Bucket(json.loads(raw)), os.environ.get("DRTOOL_CHECKPOINTS_FOLDER", "")


def _start(bucket: checkpoint.Bucket, folder: str, config: model.Config) -> model.State:
    steps = checkpoint.complete_steps(bucket, folder)
    return checkpoint.load(bucket, folder, steps[-1], config) if steps else model.initial_state(config)


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _write(path: str, report: dict[str, Any]) -> None:
    """In place, compact: a termination log is a mounted file (not renamed over) of at most 4 KiB."""
    Path(path).write_text(json.dumps(report, separators=(",", ":")))


def train(args: argparse.Namespace, config: model.Config) -> None:
    bucket, folder = _location()
    state = _start(bucket, folder, config)
    _say(started=state.step)
    target = model.teacher(config)

    def after_shard(number: int) -> None:
        if state.step == args.pause_in_save and number == PAUSE_AFTER_SHARD:
            _say(paused=state.step, shards=number, of=len(checkpoint.SHARDS))
            while True:  # until killed: the checkpoint stays torn
                time.sleep(3600)

    while state.step < args.until:
        loss = model.train_step(config, state, target)
        if args.every and state.step % args.every == 0:
            checkpoint.save(bucket, folder, state, config, after_shard)
            _say(saved=state.step, loss=loss.hex(), at=time.time())


def resume(args: argparse.Namespace, config: model.Config) -> None:
    bucket, folder = _location()
    state = _start(bucket, folder, config)
    report: dict[str, Any] = {"resumed_from_step": state.step, "params_sha256": model.digest(state.params)}
    target = model.teacher(config)
    losses = report["losses"] = {}
    for _ in range(args.steps):
        loss = model.train_step(config, state, target)
        losses[str(state.step)] = loss.hex()
    _write(args.report, report)


def reference(args: argparse.Namespace, config: model.Config) -> None:
    state = model.initial_state(config)
    target = model.teacher(config)
    report: dict[str, Any] = {"losses": {}}
    while True:
        if state.step == args.digest_at:
            report["params_sha256"] = model.digest(state.params)
        if state.step >= args.until:
            break
        loss = model.train_step(config, state, target)
        if state.step > args.digest_at:
            report["losses"][str(state.step)] = loss.hex()
    _write(args.report, report)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m drtool_lab.trainer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("train")
    p.add_argument("--until", type=int, required=True)
    p.add_argument("--every", type=int, required=True)
    p.add_argument("--pause-in-save", type=int, default=-1)
    p = sub.add_parser("resume")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--report", required=True)
    p = sub.add_parser("reference")
    p.add_argument("--until", type=int, required=True)
    p.add_argument("--digest-at", type=int, required=True)
    p.add_argument("--report", required=True)
    args = parser.parse_args()
    {"train": train, "resume": resume, "reference": reference}[args.mode](args, model.Config())


if __name__ == "__main__":
    main()
