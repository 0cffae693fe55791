"""Upstream Go servers for the lab (MinIO, ...), built once from their pinned module into a per-user cache.

The lab runs real upstream servers rather than fakes, and many of them ship only as Go modules. Building
MinIO takes minutes and over a GiB of memory, so the binary is cached outside the repository in
``$DRTOOL_CACHE/bin/<name>-<version>`` (default ``~/.cache/drtool``), keyed by the pinned version so a
version bump builds a new binary instead of silently reusing an old one.

CI warms the cache with ``python -m drtool.lab.build minio`` (prints the binary's path).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from drtool.errors import DrtoolError, SourceError

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

# name -> (module, version): the servers `python -m drtool.lab.build NAME` knows how to build
PINNED: dict[str, tuple[str, str]] = {"minio": (MINIO_MODULE, MINIO_VERSION)}

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
    target = binary_path(name, version)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if not target.is_file():
            _build(module, version, target)
    return target


def minio_binary() -> Path:
    return go_binary("minio", MINIO_MODULE, MINIO_VERSION)


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
        env = {**os.environ, "GOBIN": tmp, "GOFLAGS": "-mod=mod"}
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
    unknown = [n for n in names if n not in PINNED]
    if not names or unknown:
        print(f"usage: python -m drtool.lab.build {{{','.join(sorted(PINNED))}}}...", file=sys.stderr)
        return 2
    try:
        for name in names:
            print(go_binary(name, *PINNED[name]))
    except DrtoolError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
