"""`training-resumes`: a restored training run continues where it should. A pod that restarts is not a
recovered job: the job must resume from the last COMPLETE checkpoint (never a torn one, never step 0),
with its parameters exactly as saved, and then train as if nothing had happened.

The backup says which step that is: the checkpoints step's artifacts name each complete checkpoint with its
step and when its marker was written, and the checkpoints it skipped (torn ones) with why. Then the team's
trainer runs **as a Job in the restored cluster**, from the plan's ``trainer`` (image, command, args: data
the cluster runs; nothing runs on drtool's machine, and nothing of drtool's environment reaches it). The
Job's one pod has two containers, with the protocol of docs/plans.md: ``resume --steps K`` against the
restored location (``DRTOOL_CHECKPOINTS``, ``DRTOOL_CHECKPOINTS_FOLDER``, ``DRTOOL_CHECKPOINTS_URL``, and
the plan's ``env_from_secret``), and ``reference --until S+K --digest-at S``, an uninterrupted run from
scratch. Each writes its JSON report as its termination message (``--report /dev/termination-log``): the
pod's status carries it back. Pass only when the resumed run started at step S, the digest of the
parameters it loaded equals the reference's at S, and its K losses equal the reference's bit for bit. The
Job is deleted either way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import posixpath
import re
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drtool.durations import Duration, format_duration
from drtool.kube.client import ApiError, KubeClient
from drtool.kube.readings import PROBE_MANAGER, Obj, conditions, items, wait_for
from drtool.plugin.checks import CheckRun, CheckSettings, CheckWatch, PlatformCheck, Verdict
from drtool.repo.manifest import Manifest

_TRAILING_NUMBER = re.compile(r"(\d+)$")
CHECK_LABEL = "drtool.dev/check"  # on the Job and its pod: what a lab's node plays (lab/node.py)
REPORT = "/dev/termination-log"  # the container's termination message: the pod's status carries it back
CONTAINERS = ("resume", "reference")


class TrainerJob(BaseModel):
    """The team's trainer, as data the restored cluster runs: one Job, never a program on drtool's machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(min_length=1)
    command: list[str] = Field(default_factory=list)  # the container's command (default: the image's entrypoint)
    args: list[str] = Field(default_factory=list)  # before the protocol's own (docs/plans.md)
    namespace: str = "default"
    service_account: str | None = None  # the pod's identity (e.g. workload identity to the checkpoint store)
    env_from_secret: str | None = None  # a Secret in `namespace` with what the trainer needs to read them


class TrainingResumesCheck(CheckSettings):
    """A restored training run resumes from its last complete checkpoint, bit for bit (docs/plans.md)."""

    type: Literal["training-resumes"]
    step: str  # the plan step that restored the checkpoints: its target holds them, its backup knows them
    folder: str = Field(min_length=1)  # the run's folder in that target (holding step-N checkpoints)
    trainer: TrainerJob  # run as a Job in the restored cluster
    steps: int = Field(default=5, ge=1, le=10_000)  # steps the resumed run trains, compared with a reference
    timeout: Duration = dt.timedelta(minutes=5)

    @model_validator(mode="before")
    @classmethod
    def _no_local_program(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "command" in data:
            raise ValueError(
                "`command` would name a program to run on the restoring machine: the check runs the trainer as a "
                "Job in the restored cluster (`trainer: {image: ..., command: [...], args: [...]}`, docs/plans.md)"
            )
        return data

    def summary(self) -> str:
        return f"training in {self.folder} (restored by step {self.step}) resumes from its last complete checkpoint"


@dataclasses.dataclass(frozen=True)
class RecoveryPoint:
    """What the backup knows about one run folder's checkpoints."""

    step: int  # the newest complete checkpoint's step: where a resume must start
    written_at: float | None  # epoch seconds its last object (its marker) was written at the source
    complete: tuple[int, ...]
    torn: tuple[int, ...]  # steps of checkpoints the backup skipped as incomplete

    @property
    def steps_lost_at_least(self) -> int:
        """The source had reached at least the newest step it began to save; everything after S is redone."""
        return max((*self.torn, self.step)) - self.step


def _in_folder(meta: Mapping[str, Any], folder: str) -> bool:
    parent = posixpath.dirname(str(meta.get("checkpoint") or ""))
    return folder.strip("/") in (parent, f"{meta.get('source')}/{parent}")  # one source, or several


def recovery_point(manifest: Manifest, plugin: str, folder: str) -> RecoveryPoint | None:
    """The newest complete checkpoint of ``folder`` in the backup (docs/checkpoints.md: artifact meta
    ``checkpoint``, ``step``, ``mtime``; plugin meta ``skipped``), or None when it holds none."""
    written: dict[int, float] = {}
    for art in manifest.artifacts_of(plugin):
        if _in_folder(art.meta, folder) and isinstance(art.meta.get("step"), int):
            step = art.meta["step"]
            written[step] = max(written.get(step, 0.0), float(art.meta.get("mtime") or 0.0))
    if not written:
        return None
    outcome = manifest.plugins.get(plugin)
    skipped = (outcome.meta.get("skipped") if outcome else None) or []
    torn = []
    for entry in skipped:
        number = _TRAILING_NUMBER.search(posixpath.basename(str(entry.get("checkpoint") or "")))
        if _in_folder(entry, folder) and number:
            torn.append(int(number.group(1)))
    step = max(written)
    return RecoveryPoint(step, written[step] or None, tuple(sorted(written)), tuple(sorted(torn)))


def trainer_env(ctx: CheckRun, check: TrainingResumesCheck) -> dict[str, str]:
    """Where the restored checkpoints are: the checkpoints step's target, and the run's folder in it."""
    target = ctx.target(check.step)
    root = str(target.get("url") or target.get("path") or "").rstrip("/")
    return {
        "DRTOOL_CHECKPOINTS": json.dumps(target),
        "DRTOOL_CHECKPOINTS_FOLDER": check.folder.strip("/"),
        "DRTOOL_CHECKPOINTS_URL": f"{root}/{check.folder.strip('/')}",
    }


def trainer_job(name: str, check: TrainingResumesCheck, env: Mapping[str, str], point: RecoveryPoint) -> Obj:
    """The Job: one pod, a ``resume`` and a ``reference`` container of the plan's trainer, no API token."""
    trainer = check.trainer
    modes = {
        "resume": ["resume", "--steps", str(check.steps)],
        "reference": ["reference", "--until", str(point.step + check.steps), "--digest-at", str(point.step)],
    }
    containers = []
    for role, mode in modes.items():
        container: Obj = {
            "name": role,
            "image": trainer.image,
            "args": [*trainer.args, *mode, "--report", REPORT],
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "terminationMessagePath": REPORT,
            "terminationMessagePolicy": "File",
        }
        if trainer.command:
            container["command"] = list(trainer.command)
        if trainer.env_from_secret:
            container["envFrom"] = [{"secretRef": {"name": trainer.env_from_secret}}]
        containers.append(container)
    pod: Obj = {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": containers}
    if trainer.service_account:
        pod["serviceAccountName"] = trainer.service_account
    labels = {"app.kubernetes.io/managed-by": "drtool", CHECK_LABEL: "training-resumes"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": {"drtool.dev/check-id": check.id}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


def run(check: TrainingResumesCheck, ctx: CheckRun, watch: CheckWatch) -> Verdict:
    if ctx.manifest is None:
        return Verdict(False, "no backup to compare with (the check runs after a plan's restore)")
    plugin = ctx.plan.step(check.step).uses
    point = recovery_point(ctx.manifest, plugin, check.folder)
    if point is None:
        return Verdict(False, f"the backup holds no complete checkpoint under {check.folder}: nothing to resume from")
    facts: dict[str, Any] = {
        "folder": check.folder,
        "recovery_step": point.step,
        "complete_steps": list(point.complete),
        "torn_steps": list(point.torn),
        "steps_lost_at_least": point.steps_lost_at_least,
        "checkpoint_written_at": _iso(point.written_at),
    }
    client = ctx.kube()
    namespace, name = check.trainer.namespace, f"drtool-training-{secrets.token_hex(3)}"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    body = json.dumps(trainer_job(name, check, trainer_env(ctx, check), point)).encode()
    try:
        client.request("POST", jobs, params={"fieldManager": PROBE_MANAGER}, body=body, ok=(201,))
    except ApiError as exc:
        return Verdict(False, f"the API server refused the trainer's Job: {exc.message}", facts)
    facts["job"] = f"{namespace}/{name}"
    try:
        left = check.timeout.total_seconds() - (watch.clock() - watch.started_s)
        reports, why = wait_for(lambda: _reports(client, namespace, name), max(left, 0.0))
    finally:
        client.request("DELETE", f"{jobs}/{name}", params={"propagationPolicy": "Background"}, ok=(200, 202, 404))
    if reports is None:
        return Verdict(False, f"the trainer's Job {name} did not finish within {format_duration(check.timeout)}: "
                       f"{why}", facts)  # fmt: skip
    if why:
        return Verdict(False, why, facts)
    resumed, reference = reports["resume"], reports["reference"]
    facts["resumed_from_step"] = resumed.get("resumed_from_step")
    failure = compare(point, resumed, reference)
    if failure:
        return Verdict(False, failure, facts)
    watch.green()
    torn = f"; step {', '.join(map(str, point.torn))} torn and not used" if point.torn else ""
    return Verdict(
        True,
        f"resumed from step {point.step}, the last complete checkpoint{torn}; parameters equal bit for bit to "
        f"those saved at step {point.step}; the next {check.steps} losses equal an uninterrupted run's "
        f"({format_duration(watch.clock() - watch.started_s)})",
        facts,
    )


def _reports(client: KubeClient, namespace: str, job: str) -> tuple[dict[str, Any] | None, str]:
    """Each container's report once both ended; an empty result and why when one failed; None while running."""
    pods = list(items(client, f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": f"job-name={job}"}))
    if not pods:
        return None, "no pod yet (is the namespace there, and may the Job create pods?)"
    pod = pods[0]
    status = pod.get("status") or {}
    ended = {
        c["name"]: c["state"]["terminated"]
        for c in status.get("containerStatuses") or []
        if (c.get("state") or {}).get("terminated")
    }
    if set(CONTAINERS) - set(ended):
        scheduled = conditions(pod).get("PodScheduled") or {}
        waits = [
            f"{c['name']} {w.get('reason')}" + (f" ({w['message']})" if w.get("message") else "")
            for c in status.get("containerStatuses") or []
            if (w := (c.get("state") or {}).get("waiting"))
        ]  # e.g. ImagePullBackOff, CreateContainerConfigError: the kubelet's reason
        why = "; ".join(waits) or scheduled.get("message") or ""
        return None, f"pod {pod['metadata']['name']} {status.get('phase', 'Pending')}" + (f": {why}" if why else "")
    reports: dict[str, Any] = {}
    for container in CONTAINERS:
        state = ended[container]
        message = str(state.get("message") or "")
        if state.get("exitCode") != 0:
            tail = " | ".join(message.strip().splitlines()[-2:]) or state.get("reason") or ""
            return {}, f"trainer {container} exited {state.get('exitCode')}: {tail}"
        try:
            reports[container] = json.loads(message)
        except ValueError:
            return {}, f"trainer {container} reported no JSON in its termination message ({len(message)} bytes)"
    return reports, ""


def compare(point: RecoveryPoint, resumed: Mapping[str, Any], reference: Mapping[str, Any]) -> str | None:
    """Why the resumed run is not the uninterrupted one continued from ``point``, or None."""
    started = resumed.get("resumed_from_step")
    if started != point.step:
        what = " (the torn checkpoint)" if started in point.torn else " (from scratch)" if started == 0 else ""
        return f"resumed from step {started}{what}, but the last complete checkpoint is step {point.step}"
    if resumed.get("params_sha256") != reference.get("params_sha256"):
        return f"the parameters loaded at step {point.step} differ from an uninterrupted run's at that step"
    for step, loss in (resumed.get("losses") or {}).items():
        want = (reference.get("losses") or {}).get(step)
        if loss != want:
            return f"loss at step {step} is {_float(loss)}, an uninterrupted run's is {_float(want)}"
    if not resumed.get("losses"):
        return "the resumed run reported no losses"
    return None


def _float(value: Any) -> str:
    try:
        return repr(float.fromhex(str(value)))
    except ValueError:
        return repr(value)


def _iso(epoch: float | None) -> str | None:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if epoch else None


CHECK = PlatformCheck("training-resumes", TrainingResumesCheck, run, reads_cluster=True)
