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

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from drtool_lab.bincache import binary_path, cache_dir, cached_binary
from drtool_lab.gomods import BINARIES, KUBE_RELEASES, KUBE_VERSION, LAB_BINARIES, lab_binaries, lab_binary, versioned
from drtool_lab.gorun import run_go

from drtool.environ import child_env
from drtool.errors import DrtoolError, SourceError

__all__ = ["KUBE_VERSION", "MINIO_VERSION", "binary_path", "cache_dir", "go_binary", "kube_apiserver_binary"]

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

# name -> (module, version): the servers built with `go install module@version`
PINNED: dict[str, tuple[str, str]] = {"minio": (MINIO_MODULE, MINIO_VERSION)}


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
    # -mod=mod: the module's own go.mod is the pin here (there is no checked-in build module)
    env = child_env({"GOFLAGS": "-mod=mod"})
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        run_go(
            ["install", "-v", f"{module}@{version}"],
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
    "minio": minio_binary,
    "lab": lambda: "\n".join(str(p) for p in lab_binaries(LAB_BINARIES).values()),
    **{name: (lambda name=name: lab_binary(name)) for name in BINARIES},  # type: ignore[misc]
    # kube-apiserver of the other Kubernetes releases (the cross-version restore tests)
    **{f"kube-apiserver@{v}": (lambda v=v: kube_apiserver_binary(v)) for v in KUBE_RELEASES},  # type: ignore[misc]
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m drtool_lab.build NAME...``: build (or find) each pinned server and print its path."""
    names = list(sys.argv[1:] if argv is None else argv)
    unknown = [n for n in names if n not in BUILDERS]
    if not names or unknown:
        print(f"usage: python -m drtool_lab.build {{{','.join(BUILDERS)}}}...", file=sys.stderr)
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
