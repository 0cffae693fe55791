"""A custom resource stored in a version the target's installed CRD no longer serves (its operator was
upgraded on the new cluster), against real kube-apiservers: restored through the version the target serves
when its CRD has no conversion webhook and the schemas agree, else refused before anything is written,
naming the version and the way out (drtool/kube/versions.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from drtool_plugins.kubernetes import KubernetesPlugin

from drtool.errors import UsageError
from drtool.kube.readings import is_true
from drtool.repo.manifest import Manifest
from drtool.repo.repository import Repository
from drtool.repo.writer import BackupSession
from drtool.restore import run_restore
from tests.fixtures.core import PASSPHRASE
from tests.fixtures.kube import KubeLab, wait_for

GROUP, PLURAL = "versions.drtool.test", "gadgets"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACE = "shop"
GADGETS = {"alpha": {"size": 1, "color": "red"}, "beta": {"size": 2, "color": "green"}}


def schema(**fields: str) -> dict[str, Any]:
    props = {name: {"type": kind} for name, kind in fields.items()}
    spec = {"type": "object", "properties": props, "required": sorted(props)}
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}


def version(name: str, served: bool, storage: bool, **fields: str) -> dict[str, Any]:
    return {"name": name, "served": served, "storage": storage, "schema": schema(**fields)}


def crd(*versions: dict[str, Any], conversion: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
        "versions": list(versions),
    }
    if conversion:
        spec["conversion"] = conversion
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": spec,
    }


OLD = crd(version("v1alpha1", True, True, size="integer", color="string"))
# the operator's upgrade: v1 stored and served, v1alpha1 kept in the list (objects stored in it) but not served
UPGRADED = crd(
    version("v1alpha1", False, False, size="integer", color="string"),
    version("v1", True, True, size="integer", color="string"),
)
RENAMED = crd(version("v1", True, True, size="integer", colour="string"))  # v1 renamed a field: no rewrite fits
WEBHOOK = {
    "strategy": "Webhook",
    "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:9/convert"}},
}


def request(kube: KubeLab, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
    with kube.apiserver.access().session() as s:
        resp = s.request(method, kube.apiserver.url + path, json=body, timeout=30)
    assert resp.status_code in ok, (method, path, resp.status_code, resp.text[:300])
    return resp.json()


def install(kube: KubeLab, definition: dict[str, Any]) -> None:
    request(kube, "POST", CRD_PATH, copy.deepcopy(definition))

    def served() -> bool:
        got = request(kube, "GET", f"{CRD_PATH}/{CRD_NAME}")
        return is_true(got, "Established")  # a fresh CRD's status may hold "conditions": null

    wait_for(served, f"CRD {CRD_NAME} Established")
    served_version = next(v["name"] for v in definition["spec"]["versions"] if v["served"])
    wait_for(
        lambda: (
            request(kube, "GET", f"/apis/{GROUP}/{served_version}/{PLURAL}", ok=(200, 404)).get("items") is not None
        ),
        "served",
    )


def namespaces(kube: KubeLab) -> set[str]:
    return {n["metadata"]["name"] for n in request(kube, "GET", "/api/v1/namespaces")["items"]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    from drtool.backends.local import LocalBackend

    return Repository.init(LocalBackend(tmp_path_factory.mktemp("crd-versions") / "store"), passphrase=PASSPHRASE)


@pytest.fixture(scope="module")
def gadgets_backup(repo: Repository, lab_root: Any) -> Manifest:
    """Gadgets stored as v1alpha1 in a source lab, backed up (the CRD with them)."""
    from tests.fixtures.kube import start_kube_lab

    source = start_kube_lab(lab_root, "crd-ver-src")
    try:
        install(source, OLD)
        request(source, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for name, spec in GADGETS.items():
            body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
            request(source, "POST", f"/apis/{GROUP}/v1alpha1/namespaces/{NAMESPACE}/{PLURAL}", body)
        with BackupSession(repo) as session:
            outcome = session.run_plugin(KubernetesPlugin(), {"kubeconfig": source.kubeconfig})
            assert outcome.status == "ok", outcome.error
            return session.commit()
    finally:
        source.lab.down()


def restore(repo: Repository, manifest: Manifest, kube: KubeLab) -> Any:
    return run_restore(repo, manifest, KubernetesPlugin(), {"kubeconfig": kube.kubeconfig})


def test_restored_through_the_version_the_upgraded_crd_serves(
    repo: Repository, gadgets_backup: Manifest, kube_target: KubeLab
) -> None:
    install(kube_target, UPGRADED)
    outcome = restore(repo, gadgets_backup, kube_target)
    assert not [c for c in outcome.checks if not c.ok], [c for c in outcome.checks if not c.ok]
    versions = outcome.result.details["versions"]
    assert versions["converted"] == [f"{CRD_NAME}: {GROUP}/v1alpha1 -> {GROUP}/v1 (apiVersion rewrite, validated)"]
    assert versions["target_crds_kept"] == [f"{CRD_NAME}: serves v1, the backup stored v1alpha1"]
    live = request(kube_target, "GET", f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/{PLURAL}")["items"]
    assert {g["metadata"]["name"]: g["spec"] for g in live} == GADGETS
    kept = request(kube_target, "GET", f"{CRD_PATH}/{CRD_NAME}")["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in kept] == [("v1alpha1", False, False), ("v1", True, True)]
    check = next(c for c in outcome.checks if c.name == "kubernetes: customresourcedefinitions.apiextensions.k8s.io")
    assert f"kept from the target (not compared): {CRD_NAME}" in check.detail
    # a rerun that refuses any difference: the kept CRD is no conflict, the converted gadgets are unchanged
    again = run_restore(
        repo, gadgets_backup, KubernetesPlugin(), {"kubeconfig": kube_target.kubeconfig}, options={"existing": "fail"}
    )
    assert not again.result.changed, again.result.summary


def refusal(repo: Repository, manifest: Manifest, kube: KubeLab, installed: dict[str, Any]) -> str:
    """The one line a restore into ``kube`` (with the CRD ``installed``) is refused with; nothing written."""
    install(kube, installed)
    before = namespaces(kube)
    with pytest.raises(UsageError) as refused:
        restore(repo, manifest, kube)
    assert namespaces(kube) == before  # not even the namespace
    return refused.value.one_line()


def test_refused_before_writing_when_the_new_version_does_not_fit(
    repo: Repository, gadgets_backup: Manifest, kube_target: KubeLab
) -> None:
    line = refusal(repo, gadgets_backup, kube_target, RENAMED)
    assert f"{CRD_NAME} {NAMESPACE}/alpha does not convert from {GROUP}/v1alpha1 to {GROUP}/v1" in line
    assert ".spec.color: field not declared in schema; nothing was written" in line, line


def test_refused_by_name_when_the_crd_converts_with_a_webhook(
    repo: Repository, gadgets_backup: Manifest, kube_target: KubeLab
) -> None:
    upgraded = crd(*copy.deepcopy(UPGRADED["spec"]["versions"]), conversion=WEBHOOK)
    line = refusal(repo, gadgets_backup, kube_target, upgraded)
    assert f"{CRD_NAME} {GROUP}/v1alpha1: the target's CRD {CRD_NAME} no longer serves v1alpha1" in line
    assert "set served: true on v1alpha1 in that CRD while restoring" in line
