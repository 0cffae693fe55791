"""A plan's transforms end to end: the seeded lab backed up (kubernetes and kueue), a plan that moves the H100
pool to A100 nodes, another storage class and another registry, its dry run listing every rewrite, a rule
that matches nothing refused, and the run into a fresh API server verified against the transformed backup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.fixtures.core import Cli, assert_clean_error
from tests.fixtures.kube import KubeLab

H100_LABELS = {
    "cloud.google.com/gke-accelerator=nvidia-h100-80gb": "cloud.google.com/gke-accelerator=nvidia-a100-80gb",
    "cloud.google.com/gke-nodepool=h100-pool": "cloud.google.com/gke-nodepool=a100-pool",
    "node.kubernetes.io/instance-type=a3-highgpu-8g": "node.kubernetes.io/instance-type=a2-ultragpu-8g",
}
TRANSFORMS = {
    "storage-classes": {"fast-ssd": "standard-rwx"},
    "image-registries": {"registry.ml.example.com": "registry.dr.example.com:5000"},
    "node-labels": H100_LABELS,
}


def _plan(path: Path, target: KubeLab, transforms: dict[str, Any]) -> Path:
    plan = {
        "apiVersion": "drtool/v1",
        "kind": "RestorePlan",
        "name": "gpu-pool-map",
        "target": {"kueue": {"kubeconfig": target.kubeconfig}, "kubernetes": {"kubeconfig": target.kubeconfig}},
        "transforms": transforms,
        "steps": [  # in the order of restore-plans/gpu-pool-move.yaml: the objects, then Kueue's quotas
            {"id": "objects", "uses": "kubernetes", "with": {"settle": 5}},
            {"id": "quotas", "uses": "kueue", "needs": ["objects"], "with": {"allow_missing": "kubeconfig-secret"}},
        ],
    }
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def test_a_gpu_pool_map_plan_dry_runs_refuses_and_restores(
    cli: Cli, tmp_path: Path, kube_source: KubeLab, kube_target: KubeLab
) -> None:
    config = cli.home / ".config/drtool/config.yaml"
    config.parent.mkdir(parents=True)
    sources = {
        "kubernetes": {"kubeconfig": kube_source.readonly_kubeconfig},
        "kueue": {"kubeconfig": kube_source.kubeconfig},
    }
    config.write_text(yaml.safe_dump({"sources": sources}))
    cli("init", "--store", str(tmp_path / "store"), check=True)
    backup = json.loads(cli("backup", "-p", "kubernetes", "-p", "kueue", "--json", check=True).stdout)
    assert backup["status"] == "complete"
    plan = _plan(tmp_path / "plan.yaml", kube_target, TRANSFORMS)

    dry = cli("restore", "--plan", str(plan), "--dry-run", check=True).stdout
    lines = [line for line in dry.splitlines() if line.startswith("transform in step")]
    assert (
        "transform in step objects: storage-classes fast-ssd -> standard-rwx: persistentvolumeclaims "
        "team-nlp/checkpoints spec.storageClassName: fast-ssd -> standard-rwx"
    ) in lines
    # the H100 flavor's node labels are rewritten by both steps that restore it (Kueue's and the objects')
    h100 = [line for line in lines if "resourceflavors.kueue.x-k8s.io h100 spec.nodeLabels" in line]
    assert {line.split(":")[0] for line in h100} == {"transform in step quotas", "transform in step objects"}
    assert len(h100) == 2 * len(H100_LABELS)
    assert any("image-registries registry.ml.example.com -> registry.dr.example.com:5000: deployments.apps" in line
               for line in lines)  # fmt: skip
    json_dry = json.loads(cli("restore", "--plan", str(plan), "--dry-run", "--json", check=True).stdout)
    assert sum(len(step["rewrites"]) for step in json_dry) == len(lines)

    typo = _plan(tmp_path / "typo.yaml", kube_target, {**TRANSFORMS, "storage-classes": {"fast-sdd": "standard"}})
    for args in (["--dry-run"], []):
        refused = cli("restore", "--plan", str(typo), *args)
        assert_clean_error(
            refused, refused.returncode, "transform storage-classes fast-sdd -> standard matches nothing"
        )
        assert refused.returncode != 0
    with kube_target.api_client() as api:
        assert not client.CoreV1Api(api).list_namespaced_persistent_volume_claim("team-nlp").items  # nothing written

    run = cli("restore", "--plan", str(plan), "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["ok"]  # every step verified against the transformed backup
    with kube_target.api_client() as api:
        claim = client.CoreV1Api(api).read_namespaced_persistent_volume_claim("checkpoints", "team-nlp")
        assert claim.spec.storage_class_name == "standard-rwx"
        flavor = client.CustomObjectsApi(api).get_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100"
        )
        assert flavor["spec"]["nodeLabels"] == {
            "cloud.google.com/gke-accelerator": "nvidia-a100-80gb",
            "cloud.google.com/gke-nodepool": "a100-pool",
            "node.kubernetes.io/instance-type": "a2-ultragpu-8g",
        }
        deployment = client.AppsV1Api(api).read_namespaced_deployment("model-server", "team-nlp")
        assert deployment.spec.template.spec.containers[0].image.startswith("registry.dr.example.com:5000/nlp/")
