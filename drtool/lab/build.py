"""Upstream Go servers for the lab (MinIO, kube-apiserver), built once from their pinned module into a cache.

The lab runs real upstream servers rather than fakes, and many of them ship only as Go modules. Building
MinIO takes minutes and over a GiB of memory (kube-apiserver: about 7 minutes and 2.4 GB), so the binary
is cached outside the repository in ``$DRTOOL_CACHE/bin/<name>-<version>`` (default ``~/.cache/drtool``),
keyed by the pinned version so a version bump builds a new binary instead of silently reusing an old one.

Two ways to build (docs/lab-builds.md): ``go install module@version`` when the module installs cleanly
(MinIO), and ``go build`` inside a checked-in build module under ``gomod/`` when it does not
(kube-apiserver: k8s.io/kubernetes needs replace directives only a main module can carry).

CI warms the cache with ``python -m drtool.lab.build minio kube-apiserver`` (prints the binaries' paths).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from drtool.environ import child_env
from drtool.errors import DrtoolError, SourceError

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

# name -> (module, version): the servers built with `go install module@version`
PINNED: dict[str, tuple[str, str]] = {"minio": (MINIO_MODULE, MINIO_VERSION)}

# kube-apiserver: built inside the checked-in module gomod/kube-apiserver, whose go.mod is the real pin.
# KUBE_VERSION names the cached binary and must equal go.mod's `require k8s.io/kubernetes` (checked before
# building); KUBE_BUILD_DATE is that release's publish time on the module proxy, so builds are reproducible.
KUBE_VERSION = "v1.37.2"
KUBE_BUILD_DATE = "2026-10-27T12:01:04Z"
KUBE_GOMOD = Path(__file__).parent / "gomod" / "kube-apiserver"
KUBE_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"

_GO_HINT = "install Go 1.24 or newer (https://go.dev/dl) and put it on PATH"


def cache_dir() -> Path:
    return Path(os.environ.get("DRTOOL_CACHE", "~/.cache/drtool")).expanduser()


def binary_path(name: str, version: str) -> Path:
    """Where ``go_binary`` keeps a build; the version is in the name so pins never collide."""
    return cache_dir() / "bin" / f"{name}-{version}"


def go_binary(name: str, module: str, version: str) -> Path:
    """Return the cached binary for ``module@version``, building it with ``go install`` if it is missing.

    Concurrent callers (parallel test workers, two `drtool lab up`) serialise on a lock file so the
    multi-minute build runs once; the result is renamed into place atomically, so a killed build never
    leaves a truncated binary that later looks valid.
    """
    return cached_binary(name, version, lambda target: _build(module, version, target))


def cached_binary(name: str, version: str, build: Callable[[Path], None]) -> Path:
    """The cached ``<name>-<version>``, calling ``build(target)`` under a lock when it is missing."""
    target = binary_path(name, version)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if not target.is_file():
            build(target)
    return target


def minio_binary() -> Path:
    return go_binary("minio", MINIO_MODULE, MINIO_VERSION)


def kube_apiserver_binary() -> Path:
    """The lab's kube-apiserver (Kubernetes ``KUBE_VERSION``), built from ``gomod/kube-apiserver`` if missing."""
    return cached_binary("kube-apiserver", KUBE_VERSION, _build_kube_apiserver)


# what `python -m drtool.lab.build NAME` can build or locate
BUILDERS: dict[str, Callable[[], Path]] = {"minio": minio_binary, "kube-apiserver": kube_apiserver_binary}


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise SourceError("go is not installed: it is needed once to build the lab's upstream servers", _GO_HINT)
    return found


def _build(module: str, version: str, target: Path) -> None:
    go = _go()
    log_path = target.parent / f".{target.name}.build.log"
    print(f"building {module}@{version} (first time only; takes minutes)...", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        env = child_env({"GOBIN": tmp, "GOFLAGS": "-mod=mod"})
        with open(log_path, "wb") as log:
            result = subprocess.run(
                [go, "install", f"{module}@{version}"], env=env, stdout=log, stderr=subprocess.STDOUT, check=False
            )
        if result.returncode != 0:
            raise SourceError(
                f"building {module}@{version} failed (go exited {result.returncode}): {_last_line(log_path)}",
                f"full log in {log_path}; check network access to the Go module proxy and free disk/memory",
            )
        built = [p for p in Path(tmp).iterdir() if p.is_file()]
        if len(built) != 1:
            raise SourceError(
                f"go install {module}@{version} produced {len(built)} files, expected 1", f"see {log_path}"
            )
        os.replace(built[0], target)


def _kube_ldflags(version: str) -> str:
    """What upstream's hack/lib/version.sh would set, so `--version` and /version report the real release."""
    major, minor = re.fullmatch(r"v(\d+)\.(\d+)\.\d+", version).groups()  # type: ignore[union-attr]
    pkg = "k8s.io/component-base/version"
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": KUBE_BUILD_DATE,
    }
    return " ".join(["-s", "-w", *(f"-X {pkg}.{k}={v}" for k, v in values.items())])


def _check_kube_pin(gomod: Path) -> None:
    """Refuse to build when go.mod and KUBE_VERSION disagree: the cache name would lie about the binary."""
    pinned = re.search(r"^require k8s\.io/kubernetes (\S+)$", (gomod / "go.mod").read_text(), re.MULTILINE)
    if not pinned or pinned.group(1) != KUBE_VERSION:
        found = pinned.group(1) if pinned else "no `require k8s.io/kubernetes` line"
        raise SourceError(
            f"{gomod / 'go.mod'} pins {found} but drtool.lab.build.KUBE_VERSION is {KUBE_VERSION}",
            "bump both together (docs/lab-builds.md, 'The pin')",
        )


def _build_kube_apiserver(target: Path) -> None:
    """``go build`` in the checked-in module, exactly as docs/lab-builds.md describes.

    ``-mod=readonly`` (set explicitly, so a GOFLAGS=-mod=mod in the caller's environment cannot loosen it)
    makes go.mod/go.sum the pin: any disagreement fails instead of silently resolving other versions.
    ``GOTOOLCHAIN=local`` keeps Go from downloading another toolchain behind the caller's back.
    """
    go = _go()
    _check_kube_pin(KUBE_GOMOD)
    log_path = target.parent / f".{target.name}.build.log"
    print(f"building kube-apiserver {KUBE_VERSION} (first time only; about 7 minutes, 2.4 GB)...", file=sys.stderr)
    env = child_env({"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"})
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        out = Path(tmp) / target.name
        argv = [go, "build", "-trimpath", "-ldflags", _kube_ldflags(KUBE_VERSION), "-o", str(out), KUBE_PACKAGE]
        with open(log_path, "wb") as log:
            result = subprocess.run(argv, cwd=KUBE_GOMOD, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0 or not out.is_file():
            raise SourceError(
                f"building kube-apiserver {KUBE_VERSION} failed (go exited {result.returncode}): "
                f"{_last_line(log_path)}",
                f"full log in {log_path}; check access to the Go module proxy and 2.5 GB of free memory",
            )
        os.replace(out, target)


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else "no output"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m drtool.lab.build NAME...``: build (or find) each pinned server and print its path."""
    names = list(sys.argv[1:] if argv is None else argv)
    unknown = [n for n in names if n not in BUILDERS]
    if not names or unknown:
        print(f"usage: python -m drtool.lab.build {{{','.join(sorted(BUILDERS))}}}...", file=sys.stderr)
        return 2
    try:
        for name in names:
            print(BUILDERS[name]())
    except DrtoolError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
