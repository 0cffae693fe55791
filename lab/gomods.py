"""The lab's Go servers built from checked-in build modules under ``gomod/`` (docs/lab-builds.md).

Three modules, because one cannot hold them all: ``gomod/lab`` builds kube-apiserver, kube-controller-manager
and kube-scheduler (``k8s.io/kubernetes``, with the replace list only a main module can carry), kwok, the
OCI registry and cert-manager's controllers, all against one set of ``k8s.io/*`` v0.37 modules, so their
shared dependencies compile once; ``gomod/kueue`` builds Kueue, whose job integrations do not compile
against ``k8s.io/api`` v0.37; ``gomod/velero`` builds Velero and its AWS object-store plugin, because
Velero's replace of kopia (with its fork) only takes effect in a main module; ``gomod/kuberay`` builds
KubeRay's operator against its own ``k8s.io/*`` v0.34 set; ``gomod/argocd`` builds Argo CD (one binary that is
its application controller and repo-server by name) with Argo CD's replace block, and the in-memory Redis its
caches use; ``gomod/trainer`` builds Kubeflow Trainer v2's controller manager (controller-runtime v0.23) and
``gomod/jobset`` the JobSet controller it pins (whose webhooks need controller-runtime v0.22), each against its
own ``k8s.io/*`` v0.35 set. KubeRay, Argo CD, Trainer and JobSet are opt-in (``opt_in``: `drtool lab up --with
kuberay`, `--with argocd`, `--with trainer`), so ``python -m drtool_lab.build lab`` and ordinary living labs do
not build them. Each module's
``go.mod``/``go.sum`` is the pin: a binary's version is the version its upstream module has there, and its
cache name also carries a hash of ``go.sum`` and of the module's own ``cmd/`` sources, so any change to the pin
or to a checked-in main builds anew. The missing binaries asked
for at once are built by one ``go build`` per module (parallel compile and links, one progress report), under
one lock.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from drtool_lab.bincache import binary_path, cache_dir, locked
from drtool_lab.gorun import go_executable, run_go

from drtool.environ import child_env
from drtool.errors import SourceError, UsageError
from drtool.servers.provision import Provision

GOMOD = Path(__file__).parent / "gomod"

# k8s.io/kubernetes: what upstream's hack/lib/version.sh would stamp in, so --version and /version report the
# release. The publish time of that release on the module proxy is the build date (reproducible builds).
KUBE_VERSION = "v1.37.2"
KUBE_BUILD_DATE = "2026-10-27T12:01:04Z"
# Other Kubernetes releases the lab runs (`drtool lab up --kubernetes`, docs/lab.md): release -> build date.
# Each has its own build module ``gomod/kube-<release>`` that builds kube-apiserver only (a bare lab: restores
# across versions need the API server, and a controller-manager may not be newer than its API server).
KUBE_RELEASES: dict[str, str] = {"v1.35.4": "2026-04-15T18:01:22Z", "v1.38.0-beta.0": "2026-11-06T00:02:25Z"}


@dataclasses.dataclass(frozen=True)
class LabBinary:
    name: str  # the cached file's name and what `python -m drtool_lab.build` accepts
    package: str  # import path of its main package
    upstream: str  # the module whose version it reports
    gomod: str  # its build module: a folder of GOMOD
    opt_in: bool = False  # built only when a lab asks for it, not with every lab (``LAB_BINARIES``)

    @property
    def version(self) -> str:
        return required_version(self.gomod, self.upstream)

    @property
    def path(self) -> Path:
        """Where the built binary is (or will be) cached."""
        return binary_path(self.name, f"{self.version}-{pin_hash(self.gomod)}")

    @property
    def source(self) -> str:
        return f"{self.upstream}@{self.version} (gomod/{self.gomod})"


_KUBE = "k8s.io/kubernetes"
_VELERO = "github.com/vmware-tanzu/velero"
_VELERO_AWS = "github.com/vmware-tanzu/velero-plugin-for-aws"
_KUBERAY = "github.com/ray-project/kuberay/ray-operator"
_ARGOCD = "github.com/argoproj/argo-cd/v3"
_LAB_REDIS = "drtool/lab/gomod/argocd/cmd/lab-redis"  # miniredis as a server: the Redis of the lab's Argo CD
_LAB_ARGOCD = "drtool/lab/gomod/argocd/cmd/argocd"  # Argo CD's main cut to its controller and repo-server
_TRAINER = "github.com/kubeflow/trainer/v2"
_JOBSET = "sigs.k8s.io/jobset"
BINARIES: dict[str, LabBinary] = {
    b.name: b
    for b in (
        *(LabBinary(n, f"{_KUBE}/cmd/{n}", _KUBE, "lab") for n in ("kube-apiserver", "kube-controller-manager")),
        LabBinary("kube-scheduler", f"{_KUBE}/cmd/kube-scheduler", _KUBE, "lab"),
        LabBinary("kwok", "sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok", "lab"),
        LabBinary("registry", "drtool/lab/gomod/lab/cmd/registry", "github.com/distribution/distribution/v3", "lab"),
        LabBinary(
            "cert-manager-controller",
            "drtool/lab/gomod/lab/cmd/cert-manager-controller",
            "github.com/cert-manager/cert-manager",
            "lab",
        ),
        LabBinary("kueue", "sigs.k8s.io/kueue/cmd/kueue", "sigs.k8s.io/kueue", "kueue"),
        LabBinary("velero", f"{_VELERO}/cmd/velero", _VELERO, "velero"),
        LabBinary("velero-plugin-for-aws", f"{_VELERO_AWS}/velero-plugin-for-aws", _VELERO_AWS, "velero"),
        LabBinary("ray-operator", _KUBERAY, _KUBERAY, "kuberay", opt_in=True),
        LabBinary("argocd", _LAB_ARGOCD, _ARGOCD, "argocd", opt_in=True),
        LabBinary("lab-redis", _LAB_REDIS, "github.com/alicebob/miniredis/v2", "argocd", opt_in=True),
        LabBinary(
            "trainer-controller-manager", f"{_TRAINER}/cmd/trainer-controller-manager", _TRAINER, "trainer", opt_in=True
        ),
        LabBinary("jobset", _JOBSET, _JOBSET, "jobset", opt_in=True),  # its main package is the module's root
    )
}
# what `python -m drtool_lab.build lab` builds: every binary but the opt-in operators
LAB_BINARIES: tuple[str, ...] = tuple(name for name, b in BINARIES.items() if not b.opt_in)


@functools.cache
def requirements(gomod: str) -> dict[str, str]:
    """``module -> version`` of every ``require`` in ``gomod/<gomod>/go.mod`` (single lines and blocks)."""
    text = (GOMOD / gomod / "go.mod").read_text()
    found: dict[str, str] = {}
    for block in re.findall(r"^require \((.*?)^\)", text, re.MULTILINE | re.DOTALL):
        found |= dict(re.findall(r"^\s*(\S+) (v\S+)", block, re.MULTILINE))
    found |= dict(re.findall(r"^require (\S+) (v\S+)", text, re.MULTILINE))
    return found


def required_version(gomod: str, module: str) -> str:
    try:
        return requirements(gomod)[module]
    except KeyError:
        missing = f"lab/gomod/{gomod}/go.mod does not require {module}"
        raise SourceError(missing, "run go mod tidy there") from None


@functools.cache
def pin_hash(gomod: str) -> str:
    """Eight hex digits of a SHA-256 over ``go.sum`` (the exact dependency set a binary was built from) and
    the module's own programs under ``cmd/`` (a small main such as cert-manager's or Argo CD's): an edit to
    either builds anew instead of reusing a binary built from the old source."""
    digest = hashlib.sha256((GOMOD / gomod / "go.sum").read_bytes())
    for source in sorted((GOMOD / gomod / "cmd").rglob("*.go")):
        digest.update(f"\0{source.relative_to(GOMOD / gomod)}\0".encode() + source.read_bytes())
    return digest.hexdigest()[:8]


def check_kube_pin(gomod: Path, version: str = KUBE_VERSION) -> None:
    """Refuse to build when go.mod and the release it is meant to build disagree: the stamped version and
    date would lie."""
    pinned = re.search(r"^\s*(?:require )?k8s\.io/kubernetes (v\S+)$", (gomod / "go.mod").read_text(), re.MULTILINE)
    if not pinned or pinned.group(1) != version:
        found = pinned.group(1) if pinned else "no k8s.io/kubernetes requirement"
        raise SourceError(
            f"{gomod / 'go.mod'} pins {found} but drtool_lab.gomods expects {version}",
            "bump both together (docs/lab-builds.md, 'The pins')",
        )


def kube_ldflags(version: str, build_date: str = KUBE_BUILD_DATE) -> list[str]:
    """``-X`` flags for what upstream's hack/lib/version.sh sets from git (else it reports v0.0.0-master)."""
    major, minor = re.fullmatch(r"v(\d+)\.(\d+)\.\d+(?:-[\w.]+)?", version).groups()  # type: ignore[union-attr]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    return [f"-X k8s.io/component-base/version.{k}={v}" for k, v in (values | {"buildDate": build_date}).items()]


def kube_release(version: str) -> str:
    """``version`` if the lab can run that Kubernetes release, else a UsageError naming the ones it can."""
    if version != KUBE_VERSION and version not in KUBE_RELEASES:
        choices = ", ".join([KUBE_VERSION, *KUBE_RELEASES])
        raise UsageError(f"the lab cannot run Kubernetes {version!r}", f"choose from {choices}")
    return version


def versioned(name: str, kubernetes: str) -> str:
    """The lab binary name for Kubernetes server ``name`` of release ``kubernetes`` (``kube-apiserver@v1.35.4``);
    the plain name for the default release."""
    return name if kube_release(kubernetes) == KUBE_VERSION else f"{name}@{kubernetes}"


def _ldflags(gomod: str) -> str:
    """Release builds' ``-s -w`` and each binary's version stamp (a ``-X`` for a package not linked is ignored)."""
    flags = ["-s", "-w"]
    if gomod.startswith("kube-"):
        release = gomod.removeprefix("kube-")
        check_kube_pin(GOMOD / gomod, release)
        flags += kube_ldflags(release, KUBE_RELEASES[release])
    elif gomod == "lab":
        check_kube_pin(GOMOD / gomod)
        flags += kube_ldflags(KUBE_VERSION)
        flags.append(f"-X sigs.k8s.io/kwok/pkg/consts.Version={required_version(gomod, 'sigs.k8s.io/kwok')[1:]}")
        cert_manager = required_version(gomod, "github.com/cert-manager/cert-manager")
        flags.append(f"-X github.com/cert-manager/cert-manager/pkg/util.AppVersion={cert_manager}")
    elif gomod == "velero":  # what Velero's hack/build.sh sets; the AWS plugin stamps no version
        flags.append(f"-X {_VELERO}/pkg/buildinfo.Version={required_version(gomod, _VELERO)}")
        flags.append(f"-X {_VELERO}/pkg/buildinfo.GitTreeState=clean")
    elif gomod == "kueue":
        flags.append(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={required_version(gomod, 'sigs.k8s.io/kueue')}")
    elif gomod == "argocd":  # what Argo CD's Makefile sets (its version file, a clean tree)
        version = required_version(gomod, _ARGOCD)
        flags += [f"-X {_ARGOCD}/common.{k}={v}" for k, v in (("version", version[1:]), ("gitTag", version))]
        flags.append(f"-X {_ARGOCD}/common.gitTreeState=clean")
    elif gomod == "jobset":  # what JobSet's Makefile stamps; Trainer's manager reports no version
        flags.append(f"-X {_JOBSET}/pkg/version.GitVersion={required_version(gomod, _JOBSET)}")
    # KubeRay's version is a constant in its source: nothing to stamp
    return " ".join(flags)


def lab_binaries(names: Iterable[str]) -> dict[str, Path]:
    """The cached binaries for ``names``, building the missing ones (one ``go build`` per build module)."""
    wanted = {n: _known(n) for n in dict.fromkeys(names)}
    for gomod in sorted({b.gomod for b in wanted.values() if not b.path.is_file()}):
        with locked(cache_dir() / "bin" / f".gomod-{gomod}.lock"):
            missing = [b for b in wanted.values() if b.gomod == gomod and not b.path.is_file()]
            if missing:
                _build(gomod, missing)
    return {n: b.path for n, b in wanted.items()}


def lab_binary(name: str) -> Path:
    return lab_binaries([name])[name]


def build_module(name: str) -> str:
    """The build module (a folder of ``GOMOD``) lab binary ``name`` is built in."""
    return _known(name).gomod


def _known(name: str) -> LabBinary:
    """A binary of ``BINARIES``, or ``kube-apiserver@<release>`` of another Kubernetes release."""
    base, _, release = name.partition("@")
    if release and base == "kube-apiserver":
        return BINARIES[base] if kube_release(release) == KUBE_VERSION else kube_apiserver_of(release)
    if name not in BINARIES:
        raise UsageError(f"no lab binary named {name!r}", f"choose from {', '.join(BINARIES)}")
    return BINARIES[name]


def kube_apiserver_of(release: str) -> LabBinary:
    """kube-apiserver of another Kubernetes release, from its own build module ``gomod/kube-<release>``."""
    return LabBinary("kube-apiserver", f"{_KUBE}/cmd/kube-apiserver", _KUBE, f"kube-{release}")


# the Go release a build module that needs a newer Go than the installed one is built with
# (docs/lab-builds.md, "The pins": the approved switch)
NEWER_GO = "go1.27.3"


def toolchain(gomod: str) -> str:
    """``GOTOOLCHAIN`` for a build module: ``local``, unless its go.mod needs a newer Go than the one installed
    (Kubernetes v1.38 needs Go 1.27): then ``NEWER_GO``, which Go fetches once through the module proxy and
    verifies against its checksum database."""
    needed = re.search(r"^go (\d+(?:\.\d+)*)$", (GOMOD / gomod / "go.mod").read_text(), re.MULTILINE)
    local = subprocess.run([go_executable(), "env", "GOVERSION"], capture_output=True, text=True, check=True)
    have = re.match(r"go(\d+(?:\.\d+)*)", local.stdout.strip())
    if needed and have and _release(needed.group(1)) > _release(have.group(1)):
        if _release(needed.group(1)) > _release(NEWER_GO.removeprefix("go")):
            raise SourceError(f"lab/gomod/{gomod} needs Go {needed.group(1)}", "raise NEWER_GO in lab/gomods.py")
        return NEWER_GO
    return "local"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


# Flags of every lab build, `go install` included (the build cache keys each compiled package on them, so equal
# flags share it). -trimpath: no local paths in the binaries. -dwarf=false: the compiler writes no DWARF, which
# the linker's -w (``_ldflags``) would drop anyway: 9.6 % less CPU for a cold build of KubeRay's module
# (docs/lab-builds.md, "Build command"), the same bytes of binary.
BUILD_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false")


def _build(gomod: str, binaries: list[LabBinary]) -> None:
    """``go build`` in the checked-in module, as docs/lab-builds.md describes.

    Every missing binary of the module is built at once: one compile of the shared packages, parallel links.
    ``-mod=readonly`` (explicit, so a GOFLAGS=-mod=mod in the caller's environment cannot loosen it) makes
    go.mod/go.sum the pin; ``GOTOOLCHAIN=local`` keeps Go from fetching another toolchain (unless go.mod
    needs a newer one: ``toolchain``); ``CGO_ENABLED=0``
    gives static binaries, as upstream ships them, and needs no C compiler.
    """
    target_dir = cache_dir() / "bin"
    env = child_env({"CGO_ENABLED": "0", "GOTOOLCHAIN": toolchain(gomod), "GOFLAGS": "-mod=readonly"})
    ldflags = _ldflags(gomod)
    what = f"{', '.join(b.name for b in binaries)} (gomod/{gomod})"
    with tempfile.TemporaryDirectory(dir=target_dir, prefix=f".gomod-{gomod}.") as tmp:
        argv = ["build", "-v", *BUILD_FLAGS, "-ldflags", ldflags, "-o", tmp + "/", *(b.package for b in binaries)]
        run_go(
            argv,
            what=what,
            log_path=target_dir / f".gomod-{gomod}.build.log",
            env=env,
            cwd=GOMOD / gomod,
            hint="check access to the Go module proxy and about 5 GB of free memory (parallel links)",
            fetch_first=True,
        )
        for b in binaries:
            os.replace(Path(tmp) / b.package.rsplit("/", 1)[1], b.path)


def go_built(program: str) -> Provision:
    """Where a binary of one of the checked-in build modules comes from, and whether it is built."""
    binary = BINARIES[program]
    path = binary.path
    return Provision(program, "go build", binary.source, binary.version, str(path) if path.is_file() else None)
