"""Upstream Go servers for the lab, built once from pinned modules into a per-user cache (docs/lab-builds.md).

The lab runs real upstream servers rather than fakes, and many of them ship only as Go modules. Two ways to
build: ``go install module@version`` when the module installs cleanly on its own (MinIO, and the Helm CLI
of the helm plugin), and ``go build`` in a checked-in build module under ``gomod/`` when it does not
(``drtool_lab.gomods``: kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the registry,
cert-manager's controllers, Kueue, Velero, and the opt-in KubeRay operator). Either way the binary lands in
``$DRTOOL_CACHE/bin/<name>-<version>`` (``drtool_lab.bincache``) and later runs reuse it.

CI warms the cache with ``python -m drtool_lab.build NAME...`` (prints the binaries' paths).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from drtool_lab.bincache import binary_path, cache_dir, cached_binary
from drtool_lab.gomods import (
    BINARIES,
    BUILD_FLAGS,
    KUBE_RELEASES,
    KUBE_VERSION,
    LAB_BINARIES,
    build_module,
    lab_binaries,
    lab_binary,
    versioned,
)
from drtool_lab.gorun import run_go

from drtool.environ import child_env
from drtool.errors import DrtoolError, SourceError

__all__ = ["KUBE_VERSION", "MINIO_VERSION", "binary_path", "cache_dir", "go_binary", "kube_apiserver_binary"]

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

# name -> (module, version): the servers built with `go install module@version` (the Helm CLI: the helm plugin's
# tests run `helm list`/`helm history` with it)
PINNED: dict[str, tuple[str, str]] = {
    "minio": (MINIO_MODULE, MINIO_VERSION),
    "helm": ("helm.sh/helm/v3/cmd/helm", "v3.22.0"),
}


def go_binary(name: str, module: str, version: str) -> Path:
    """The cached binary for ``module@version``, built with ``go install`` if it is missing."""
    return cached_binary(name, version, lambda target: _install(module, version, target))


def minio_binary() -> Path:
    return go_binary("minio", MINIO_MODULE, MINIO_VERSION)


def kube_apiserver_binary(kubernetes: str = KUBE_VERSION) -> Path:
    """The lab's kube-apiserver of Kubernetes ``kubernetes`` (default ``KUBE_VERSION``, from ``gomod/lab``;
    another release from ``gomod/kube-<release>``), built if missing."""
    return lab_binary(versioned("kube-apiserver", kubernetes))


def _install(module: str, version: str, target: Path) -> None:
    # -mod=mod: the module's own go.mod is the pin here (there is no checked-in build module). The build modules'
    # flags: Go's build cache keys on them, so the packages both compile (the standard library first) compile
    # once; -s -w: no symbol or DWARF tables, as release builds
    env = child_env({"GOFLAGS": "-mod=mod"})
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        run_go(
            ["install", "-v", *BUILD_FLAGS, "-ldflags=-s -w", f"{module}@{version}"],
            what=f"{module}@{version}",
            log_path=target.parent / f".{target.name}.build.log",
            env=env | {"GOBIN": tmp},
            hint="check network access to the Go module proxy and free disk and memory",
        )
        built = [p for p in Path(tmp).iterdir() if p.is_file()]
        if len(built) != 1:
            raise SourceError(f"go install {module}@{version} produced {len(built)} files, expected 1")
        os.replace(built[0], target)


# what `python -m drtool_lab.build NAME...` builds or locates: `lab` is every server the tests start
BUILDERS: dict[str, Callable[[], object]] = {
    **{name: (lambda name=name: go_binary(name, *PINNED[name])) for name in PINNED},  # type: ignore[misc]
    "lab": lambda: "\n".join(str(p) for p in lab_binaries(LAB_BINARIES).values()),
    **{name: (lambda name=name: lab_binary(name)) for name in BINARIES},  # type: ignore[misc]
    # kube-apiserver of the other Kubernetes releases (the cross-version restore tests)
    **{f"kube-apiserver@{v}": (lambda v=v: kube_apiserver_binary(v)) for v in KUBE_RELEASES},  # type: ignore[misc]
}


def build(names: Sequence[str], jobs: int = 1) -> None:
    """Build every missing binary behind ``names``, ``jobs`` builds at a time, started in the order named.

    A build is one ``go install`` pin or one build module's missing binaries (one ``go build``). Two at a time
    fill the core one build leaves idle while it downloads modules, loads packages and links
    (docs/lab-builds.md, "Two builds at a time"); the first failure is raised once the running builds end.
    """
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        started = [pool.submit(_build_one, binaries) for binaries in builds(names)]
        try:
            for future in started:
                future.result()
        finally:
            pool.shutdown(cancel_futures=True)


def builds(names: Sequence[str]) -> list[list[str]]:
    """The separate builds behind ``names``, in the order first named: the binaries of each build module (one
    ``go build``), and each ``go install`` pin alone."""
    found: dict[str, list[str]] = {}
    for name in names:
        for binary in LAB_BINARIES if name == "lab" else (name,):
            found.setdefault(binary if binary in PINNED else build_module(binary), []).append(binary)
    return list(found.values())


def _build_one(binaries: list[str]) -> None:
    if binaries[0] in PINNED:
        go_binary(binaries[0], *PINNED[binaries[0]])
    else:
        lab_binaries(binaries)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m drtool_lab.build [--jobs N] NAME...``: build (or find) each pinned server and print its path."""
    parser = argparse.ArgumentParser(prog="python -m drtool_lab.build", description="build the lab's Go servers")
    parser.add_argument("--jobs", type=int, default=1, help="builds at a time (default 1)")
    parser.add_argument("names", nargs="+", metavar="NAME", choices=BUILDERS, help=", ".join(BUILDERS))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        build(args.names, args.jobs)
        for name in args.names:
            print(BUILDERS[name]())
    except DrtoolError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
