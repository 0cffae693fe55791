"""Platform checks without a cluster: the recovery point a backup records, how a resume is judged, and the
checks' strict settings. The checks themselves pass and fail on a restored living cluster in
tests/plans_rehearsal/test_living_restore.py, which shares its living source and target with the restore tests
(one living lab start fewer than when they had a module of their own here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from drtool_plugins.checkpoints.resume_check import RecoveryPoint, compare, recovery_point

from drtool.plans.checks import run_checks
from drtool.plans.schema import Plan
from drtool.plans.validate import check_file
from drtool.plugin.checks import contributed
from drtool.plugin.manager import load_plugins
from drtool.repo.manifest import ArtifactEntry, Manifest, PluginOutcome

TRAINER = {"image": "drtool", "command": ["python", "-m", "drtool_lab.trainer"]}  # run by the lab's node


def backup_of(checkpoints: dict[str, float], skipped: list[str], source: str = "training") -> Manifest:
    """A manifest as the checkpoints plugin writes it: one artifact per object, the torn ones in ``skipped``."""
    artifacts = [
        ArtifactEntry(plugin="checkpoints", name=f"{source}/{name}/{file}", size=1, sha256="0" * 64, chunks=[],
                      meta={"source": source, "checkpoint": name, "step": int(name.rsplit("-", 1)[1]),
                            "mtime": written - (file != "model.safetensors.index.json")})
        for name, written in checkpoints.items() for file in ("model-00001-of-00001.safetensors",
                                                              "model.safetensors.index.json")
    ]  # fmt: skip
    meta = {"skipped": [{"source": source, "checkpoint": name, "reason": "torn"} for name in skipped]}
    outcome = PluginOutcome(status="ok", started="2026-12-01T00:00:00Z", finished="2026-12-01T00:01:00Z", meta=meta)
    return Manifest(
        id="20261201T000000Z-abcdef", store_id="s", started="2026-12-01T00:00:00Z", finished="2026-12-01T00:01:00Z",
        status="complete", hostname="h", drtool_version="0", plugins={"checkpoints": outcome}, artifacts=artifacts,
    )  # fmt: skip


def test_the_recovery_point_is_what_the_backup_recorded() -> None:
    manifest = backup_of({"mlp/step-000010": 1000.0, "mlp/step-000020": 2000.0, "other/step-000090": 9.0},
                         ["mlp/step-000030", "other/step-000100"])  # fmt: skip
    point = recovery_point(manifest, "checkpoints", "mlp")
    assert point == RecoveryPoint(20, 2000.0, (10, 20), (30,)) and point.steps_lost_at_least == 10
    assert recovery_point(manifest, "checkpoints", "training/mlp") == point  # several sources: under the source
    assert recovery_point(manifest, "checkpoints", "gone") is None


def test_a_resume_is_judged_by_step_parameters_and_losses() -> None:
    point = RecoveryPoint(20, None, (10, 20), (30,))
    reference = {"params_sha256": "p20", "losses": {"21": (1.5).hex(), "22": (1.25).hex()}}
    assert (
        compare(point, {"resumed_from_step": 20, "params_sha256": "p20", "losses": reference["losses"]}, reference)
        is None
    )
    torn = compare(point, {"resumed_from_step": 30}, reference)
    assert torn == "resumed from step 30 (the torn checkpoint), but the last complete checkpoint is step 20"
    drift = {"resumed_from_step": 20, "params_sha256": "p20", "losses": {"21": (1.5).hex(), "22": (1.2500001).hex()}}
    assert compare(point, drift, reference) == "loss at step 22 is 1.2500001, an uninterrupted run's is 1.25"
    other = compare(point, {"resumed_from_step": 20, "params_sha256": "p21", "losses": {}}, reference)
    assert other == "the parameters loaded at step 20 differ from an uninterrupted run's at that step"


def test_platform_checks_are_strict_and_a_check_of_a_skipped_step_is_skipped(tmp_path: Path) -> None:
    """Each platform check is its plugin's (the platform_checks hook): `plan validate` checks its keys against the
    plugin's model; a check naming a step the plan does not have is refused by the schema itself."""
    base = {"name": "p", "steps": [{"id": "checkpoints", "uses": "checkpoints", "optional": True}]}
    typo = {"type": "kueue-admits", "id": "a", "namespace": "n", "queue": "q", "flavour": "a100"}
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps({**base, "checks": [typo]}))
    problems = [p.message for p in check_file(path, load_plugins()).errors]
    assert problems == ["checks[0] (a): check key 'flavour' is unknown; did you mean 'flavor'?"]
    with pytest.raises(ValueError, match="names step 'restore-checkpoints', which the plan does not have"):
        Plan.model_validate({**base, "checks": [{"type": "training-resumes", "id": "t", "step": "restore-checkpoints",
                                                 "folder": "mlp", "trainer": TRAINER}]})  # fmt: skip
    check = {"type": "gc-stable", "id": "g", "window": "1m30s", "namespaces": None}
    assert contributed(load_plugins())["gc-stable"].settings.model_validate(check).window.total_seconds() == 90
    training = {"type": "training-resumes", "id": "t", "step": "checkpoints", "folder": "mlp", "trainer": TRAINER}
    plan = Plan.model_validate({**base, "checks": [training]})
    manifest = backup_of({}, []).model_copy(update={"plugins": {}})  # the checkpoints plugin is not in the backup
    (result,) = run_checks(plan, {}, manifest)
    assert result.ok and result.facts == {"skipped": True} and result.green_s is None
    assert result.detail == "skipped: step checkpoints did not run (plugin not in backup)"
