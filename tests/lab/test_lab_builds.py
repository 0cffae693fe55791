"""How the lab's Go servers are pinned and built (docs/lab-builds.md): the pins agree with each other, the
module hash is Go's own, and a build reports progress a person can read and fails with its reason."""

from __future__ import annotations

import io
import os
import re
import uuid
from pathlib import Path

import pytest
from drtool_lab import build, gomods, gorun, kube_seed, upstream
from drtool_lab.cluster import cluster_kinds
from drtool_lab.components.kwok import node_pools, nodes
from drtool_lab.lab import BARE_KINDS, LIVING_KINDS, OPT_IN_KINDS, Lab

from drtool.errors import SourceError, UsageError


def test_crd_pins_are_the_versions_the_controllers_are_built_from() -> None:
    built = {"kueue": "kueue", "kwok": "lab", "cert-manager": "lab", "velero": "velero", "kuberay": "kuberay"}
    built |= {"argo-cd": "argocd", "jobset": "jobset", "trainer": "trainer"}
    for key, gomod in built.items():
        pin = upstream.MODULES[key]
        assert gomods.required_version(gomod, pin.module) == pin.version, key
        # and the zip hash pinned for the CRDs is the one go.sum pins for the build
        go_sum = (gomods.GOMOD / gomod / "go.sum").read_text()
        assert f"{pin.module} {pin.version} {pin.h1}\n" in go_sum, key
    # the CRD-only modules Kueue integrates with are the versions Kueue's own build resolves
    for key in ("jobset", "lws", "trainer", "training-operator"):
        pin = upstream.MODULES[key]
        assert gomods.required_version("kueue", pin.module) == pin.version, key


def test_opt_in_operators_are_not_built_with_every_lab() -> None:
    """KubeRay and Argo CD are built when a lab asks for them (`--with kuberay`, `--with argocd`), not by
    `python -m drtool_lab.build lab`."""
    assert gomods.BINARIES["ray-operator"].version == "v1.5.0" and gomods.BINARIES["ray-operator"].opt_in
    assert gomods.BINARIES["argocd"].version == "v3.6.2" and gomods.BINARIES["lab-redis"].opt_in
    assert not {"ray-operator", "argocd", "lab-redis"} & set(gomods.LAB_BINARIES) and "kueue" in gomods.LAB_BINARIES
    assert {"kuberay", "argocd"} <= set(OPT_IN_KINDS) and not {"kuberay", "argocd"} & set(LIVING_KINDS)
    for name in ("trainer-controller-manager", "jobset"):  # `--with trainer` (brings jobset)
        assert gomods.BINARIES[name].opt_in and gomods.BINARIES[name].version in ("v2.2.0", "v0.11.1")
    assert {"trainer", "jobset"} <= set(OPT_IN_KINDS) and "trainer" not in LIVING_KINDS


def test_binaries_are_cached_by_version_and_pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRTOOL_CACHE", str(tmp_path))
    apiserver = gomods.BINARIES["kube-apiserver"]
    assert apiserver.version == gomods.KUBE_VERSION
    assert apiserver.path == tmp_path / "bin" / f"kube-apiserver-{gomods.KUBE_VERSION}-{gomods.pin_hash('lab')}"
    assert gomods.BINARIES["kueue"].version == "v0.17.0" and gomods.BINARIES["kwok"].version == "v0.8.0"
    assert gomods.BINARIES["registry"].version == "v3.1.2"


@pytest.mark.e2e  # a go build
def test_a_build_reports_progress_and_its_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gorun, "PROGRESS_EVERY", 0.01)  # the go command alone takes longer to start
    (tmp_path / "go.mod").write_text("module hello\n\ngo 1.22\n")
    # a source never built before: a package found in Go's build cache is not compiled, and `-v` names none
    (tmp_path / "main.go").write_text(f'package main\n\nfunc main() {{ println("hello {uuid.uuid4()}") }}\n')
    out = io.StringIO()
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    log = tmp_path / "build.log"
    argv = ["build", "-v", "-o", str(tmp_path / "hello"), "."]
    gorun.run_go(argv, what="hello v1", log_path=log, env=env, cwd=tmp_path, hint="h", out=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("building hello v1: first time only") and str(log) in lines[0]
    assert any(line.startswith("  hello v1: ") and "packages compiled" in line for line in lines[1:-1]), lines
    assert lines[-1].startswith("built hello v1 in ")
    # `-v` names each package compiled: ours, and the standard library's too when no build before used these
    # flags (a cold Go cache; the lab's builds use their own flags, so they do not warm it for this one)
    assert (tmp_path / "hello").is_file() and "hello" in log.read_text().splitlines()


@pytest.mark.e2e  # a go build
def test_a_failed_build_names_its_log_and_the_compiler_error(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module broken\n\ngo 1.22\n")
    (tmp_path / "main.go").write_text("package main\n\nfunc main() { undefinedThing() }\n")
    log = tmp_path / "build.log"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    with pytest.raises(SourceError, match="undefined: undefinedThing") as failed:
        gorun.run_go(["build", "."], what="broken", log_path=log, env=env, cwd=tmp_path, hint="h", out=io.StringIO())
    assert str(log) in (failed.value.hint or "")


def test_the_gpu_node_pools_match_the_seeded_flavors() -> None:
    flavors = {p["flavor"]: p for p in node_pools() if "flavor" in p}
    assert set(flavors) == set(kube_seed.GPU_FLAVORS)
    for name, (accelerator, instance) in kube_seed.GPU_FLAVORS.items():
        spec = kube_seed.render("flavor", name=name, accelerator=accelerator, instance=instance)[0]["spec"]
        pool = flavors[name]
        assert spec["nodeLabels"].items() <= pool["labels"].items()
        assert pool["taints"] == spec["nodeTaints"] and int(pool["capacity"]["nvidia.com/gpu"]) > 0
    made = nodes()
    assert len(made) == sum(p["nodes"] for p in node_pools())
    assert all(n["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"} for n in made)


def test_other_kubernetes_releases_have_their_own_build_module_and_cache_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DRTOOL_CACHE", str(tmp_path))
    for release in gomods.KUBE_RELEASES:
        gomods.check_kube_pin(gomods.GOMOD / f"kube-{release}", release)  # go.mod pins what it claims
        built = gomods._known(f"kube-apiserver@{release}")
        assert built.version == release and built.gomod == f"kube-{release}"
        assert built.path == tmp_path / "bin" / f"kube-apiserver-{release}-{gomods.pin_hash(f'kube-{release}')}"
    assert gomods._known(f"kube-apiserver@{gomods.KUBE_VERSION}") is gomods.BINARIES["kube-apiserver"]
    assert gomods.versioned("kube-apiserver", gomods.KUBE_VERSION) == "kube-apiserver"
    assert gomods.versioned("kube-apiserver", "v1.35.4") == "kube-apiserver@v1.35.4"
    with pytest.raises(UsageError, match=r"cannot run Kubernetes 'v1.30.0'") as refused:
        gomods.versioned("kube-apiserver", "v1.30.0")
    assert "choose from v1.37.2, v1.35.4, v1.38.0-beta.0" in refused.value.one_line()


def test_a_release_build_stamps_its_version_and_fetches_a_newer_go_only_when_needed() -> None:
    flags = gomods.kube_ldflags("v1.38.0-beta.0", gomods.KUBE_RELEASES["v1.38.0-beta.0"])
    assert "-X k8s.io/component-base/version.gitMinor=38" in flags
    assert "-X k8s.io/component-base/version.gitVersion=v1.38.0-beta.0" in flags
    assert gomods.toolchain("lab") == "local"  # go 1.26.0: the Go this machine has
    assert gomods.toolchain("kube-v1.38.0-beta.0") == "go1.27.3"  # Kubernetes v1.38 needs Go 1.27


def test_a_lab_of_another_release_runs_bare_and_remembers_its_release(tmp_path: Path) -> None:
    lab = Lab("old", root=tmp_path, kubernetes="v1.35.4")
    server = lab.add("kube-apiserver")
    assert server.kubernetes == "v1.35.4" and server.binaries == ("kube-apiserver@v1.35.4",)
    with pytest.raises(UsageError, match=r"v1\.35\.4: its kube-controller-manager is built for v1\.37\.2"):
        lab.add("kube-controller-manager")
    lab.save()
    assert Lab.load("old", root=tmp_path).kubernetes == "v1.35.4"
    assert Lab("new", root=tmp_path).add("kube-apiserver").binaries == ("kube-apiserver",)
    with pytest.raises(UsageError, match="cannot run Kubernetes"):
        Lab("bad", root=tmp_path, kubernetes="v2.0.0")
    assert cluster_kinds(Lab("seeded", root=tmp_path, kubernetes="v1.38.0-beta.0")) == BARE_KINDS  # lab support


def test_every_binary_is_a_package_its_build_module_can_name() -> None:
    """A package of the build module itself is named by the module path in its go.mod: a cached binary is never
    rebuilt, so a wrong path shows only on a machine with an empty cache (it did: the registry and
    cert-manager after the lab moved out of drtool/)."""
    for binary in gomods.BINARIES.values():
        folder = gomods.GOMOD / binary.gomod
        own = re.search(r"^module (\S+)$", (folder / "go.mod").read_text(), re.MULTILINE)
        assert own, binary.gomod
        if binary.package.startswith(own.group(1) + "/"):
            assert (folder / binary.package.removeprefix(own.group(1) + "/") / "main.go").is_file(), binary.name
        else:
            assert binary.package.startswith(binary.upstream), f"{binary.name}: {binary.package} in no required module"
            assert binary.version, binary.name


def test_the_builds_named_at_once_are_one_per_build_module_in_the_order_named() -> None:
    """`python -m drtool_lab.build --jobs 2 ...` (tests/run.sh) runs these side by side: one `go build` per build
    module, so the binaries of one module still share its compiled packages."""
    found = build.builds(["lab", "kube-apiserver@v1.35.4", "lab-redis", "helm", "argocd", "minio"])
    assert found[0] == [n for n in gomods.LAB_BINARIES if gomods.BINARIES[n].gomod == "lab"]
    assert found[1:] == [
        ["kueue"],
        ["velero", "velero-plugin-for-aws"],
        ["kube-apiserver@v1.35.4"],
        ["lab-redis", "argocd"],
        ["helm"],
        ["minio"],
    ]
    with pytest.raises(SystemExit, match="2"):  # a usage error, before anything is built
        build.main(["--jobs", "0", "minio"])


def test_a_build_fetches_its_modules_many_at_a_time_and_counts_them() -> None:
    """The zips of a build module are fetched first, `gorun.DOWNLOADS` at a time (`go mod download -x`), and the
    progress line counts them as `go build` counts its own `go: downloading` lines."""
    tally = gorun._Tally()
    url = "https://proxy.golang.org/github.com/josharian/intern/@v/v1.0.0"
    for line in (f"# get {url}.info: 200 OK (0.5s)", f"# get {url}.zip", f"# get {url}.zip: 200 OK (0.1s)"):
        tally.feed(line + "\n")
    tally.feed("go: downloading k8s.io/api v0.37.2\n")
    tally.feed("k8s.io/api/core/v1\n")
    assert (tally.downloads, tally.packages, tally.last) == (2, 1, "k8s.io/api/core/v1")
    tally.feed(f"# get {url}.zip: 200 OK (0.1s)\n")
    assert tally.last == "github.com/josharian/intern@v1.0.0" and gorun.DOWNLOADS > 2
