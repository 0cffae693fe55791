"""The upstream Go modules the lab takes its CustomResourceDefinitions and controller files from, pinned.

The CRDs a lab installs come from the same module versions the lab's controllers are built from (Kueue,
cert-manager, kwok: ``lab/gomod/*/go.mod`` pin them too, and a test checks that both agree), or,
for kinds no lab controller serves, from the version Kueue's own go.mod integrates with (JobSet,
LeaderWorkerSet, Kubeflow Trainer and Training Operator) or the newest release the module proxy serves
(ExternalDNS, KServe, Velero). This table is the one place those versions are pinned.

Files are read straight from the module zip that ``go mod download -json module@version`` reports, after
checking the zip's ``h1:`` hash (the one go.sum records; Go verified the zip against it, and against the
checksum database, when it downloaded it) against the pin: nothing is read from outside the repository
except that verified zip in Go's module cache. Once a module is in the cache, reading it needs no
network (``go mod download`` answers from the cache). ``go mod download`` refuses to report the extracted
folder of a module whose go.mod needs a newer Go than the installed one (ExternalDNS v0.23.0 needs 1.27), but
it still downloads and verifies its zip, which is all this needs.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import json
import subprocess
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from drtool_lab.bincache import cache_dir
from drtool_lab.gorun import go_executable

from drtool.environ import child_env
from drtool.errors import SourceError

Obj = dict[str, Any]
# libyaml's safe loader when PyYAML has it: the pure-Python one needs ~15 s for the 6.6 MB of CRDs
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclasses.dataclass(frozen=True)
class Upstream:
    module: str
    version: str
    h1: str  # the module zip's hash as go.sum records it
    crds: tuple[str, ...] = ()  # globs of the CRD files the lab installs, relative to the module's root
    seeded: bool = True  # the seed installs its CRDs; False: only a test that names the module does

    @property
    def ref(self) -> str:
        return f"{self.module}@{self.version}"


MODULES: dict[str, Upstream] = {
    "kueue": Upstream(
        "sigs.k8s.io/kueue",
        "v0.17.0",
        "h1:7hzb38M4eKGzYW+CFv2s1L+swzzacUCHOCXxZmAV90I=",
        ("config/components/crd/bases/*.yaml",),
    ),
    "cert-manager": Upstream(
        "github.com/cert-manager/cert-manager",
        "v1.21.2",
        "h1:UWgoYM+KLNtRlqmoWOKjKBOBUPVHeepQ6/ac3ERJW68=",
        ("deploy/crds/*.yaml",),
    ),
    "kwok": Upstream("sigs.k8s.io/kwok", "v0.8.0", "h1:OTIOTwgROqPMovcTwxICx2eYQ4AwLpSx5EpjbDKF4SQ="),
    "jobset": Upstream(
        "sigs.k8s.io/jobset",
        "v0.11.1",
        "h1:WgLEBnXTeX+4MxfVkIbfm4jIVgjvIY6Jfaei2okxKNk=",
        ("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
    ),
    "lws": Upstream(
        "sigs.k8s.io/lws",
        "v0.8.0",
        "h1:DdhJ8QabwTfWgbgaHH2gdf8twliioHaoSfmDXRYEVU0=",
        ("config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
    ),
    "trainer": Upstream(
        "github.com/kubeflow/trainer/v2",
        "v2.2.0",
        "h1:whChZckEtycLo1UKH/M0hiNaCUozbLvf9JrgmMv+TAg=",
        (
            "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
            "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        ),
    ),
    "training-operator": Upstream(
        "github.com/kubeflow/training-operator",
        "v1.9.3",
        "h1:aaSHqskOtCY8Dn8sVd+l9p5XAczW6O0nYMPjVLAw/lc=",
        ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
    ),
    "external-dns": Upstream(
        "sigs.k8s.io/external-dns",
        "v0.23.0",
        "h1:35KyAZtLN8o5nIE0aPKfyhILbf5HHkKPJby/4FowPJM=",
        ("config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml",),
    ),
    "kserve": Upstream(
        "github.com/kserve/kserve",
        "v0.20.0",
        "h1:Bs7HxmGV4KFqqptDcWseKv+mwD4YOYHJWcuVgPG2Gug=",
        # the minimal CRD (spec and status preserve unknown fields): the full one is 2 MB of schema
        ("config/crd/minimal/serving.kserve.io_inferenceservices.yaml",),
    ),
    "velero": Upstream(
        "github.com/vmware-tanzu/velero",
        "v1.18.3",
        "h1:9uwN5yxTWQl9PsF5ljX4xiG+7VIq3I9mxOQ0DyyZ31A=",
        ("config/crd/v1/bases/*.yaml",),
    ),
    # KubeRay's operator: an opt-in lab component (`--with kuberay`), so the seed does not install its CRDs
    "kuberay": Upstream(
        "github.com/ray-project/kuberay/ray-operator",
        "v1.5.0",
        "h1:KCjCQ7PSsvs9Ke+90CZbbs498nuaIJ/JkXk4vd54EVg=",
        ("config/crd/bases/*.yaml",),
        seeded=False,
    ),
    # GitOps controllers, for the holds' tests: Argo CD is also an opt-in lab component (`--with argocd`, built in
    # gomod/argocd at this version); Flux's controllers do not build here (docs/lab-builds.md)
    "argo-cd": Upstream(
        "github.com/argoproj/argo-cd/v3",
        "v3.6.2",
        "h1:t6RQrVV4hg9M0+lPMsUvi9e4RnYV9dE99/guXGxG6Lc=",
        ("manifests/crds/application-crd.yaml", "manifests/crds/appproject-crd.yaml"),
        seeded=False,
    ),
    "flux-kustomize": Upstream(
        "github.com/fluxcd/kustomize-controller",
        "v1.10.1",
        "h1:IjTnrkIy0ULJoTNC2ZKuMb32vkqj7dJ6zt6UqbTFxKA=",
        ("config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",),
        seeded=False,
    ),
}


@functools.cache
def module_zip(key: str) -> Path:
    """The verified zip of ``MODULES[key]`` in Go's module cache (downloaded first when missing)."""
    up = MODULES[key]
    env = child_env({"GOFLAGS": "", "GOTOOLCHAIN": "local"})
    work = cache_dir()
    work.mkdir(parents=True, exist_ok=True)  # outside any go.mod, so the current folder cannot matter
    proc = subprocess.run(
        [go_executable(), "mod", "download", "-json", up.ref],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {"Error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    zip_path = Path(info["Zip"]) if info.get("Zip") else None
    if zip_path is None or not zip_path.is_file():
        # where Go looked: a HOME other than the one whose cache holds the module is the usual cause offline
        where = env.get("GOMODCACHE") or str(Path(env.get("GOPATH") or Path(env.get("HOME", "~")) / "go") / "pkg/mod")
        raise SourceError(
            f"cannot download {up.ref} into Go's module cache {where}: {info.get('Error', 'no zip reported')}",
            "the first lab seed needs the Go module proxy (later ones read Go's module cache)",
        )
    if info.get("Sum") != up.h1:
        got = info.get("Sum") or "no hash"
        raise SourceError(f"{up.ref} in Go's module cache has {got}, but it is pinned at {up.h1}", "go clean -modcache")
    return zip_path


def module_files(key: str, patterns: Iterable[str]) -> list[tuple[str, str]]:
    """``(path, text)`` of the files of ``MODULES[key]`` matching ``patterns`` (globs), sorted by path."""
    up = MODULES[key]
    prefix = f"{up.module}@{up.version}/"
    patterns = tuple(patterns)
    with zipfile.ZipFile(module_zip(key)) as z:
        names = [n.removeprefix(prefix) for n in z.namelist()]
        wanted = sorted(n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns))
        if not wanted:
            raise SourceError(f"{up.ref} has no file matching {', '.join(patterns)}")
        return [(n, z.read(prefix + n).decode()) for n in wanted]


def yaml_docs(key: str, patterns: Iterable[str]) -> list[Obj]:
    """The YAML documents in ``MODULES[key]``'s files matching ``patterns``."""
    docs: list[Obj] = []
    for _, text in module_files(key, patterns):
        docs += [d for d in yaml.load_all(text, Loader=Loader) if d]
    return docs


def crds(keys: Iterable[str] | None = None) -> list[Obj]:
    """Every CRD the seed installs (or those of ``keys``), in table order."""
    keys = keys or [key for key, up in MODULES.items() if up.seeded]
    return [d for key in keys if MODULES[key].crds for d in yaml_docs(key, MODULES[key].crds)]
