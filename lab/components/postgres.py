"""A PostgreSQL server from the machine's own binaries: the catalog database for the lab and for tests.

PostgreSQL refuses to run as root, and CI runs as root, so then ``initdb`` and ``postgres`` run as the
``postgres`` OS user. That user cannot enter root's 0700 folders (``/root``, pytest's temp dirs), so its
data directory and socket then live in a private folder under /var/tmp that it owns, recorded in the
component state as ``run_dir`` (and linked from the component folder as ``data``); ``purge()`` removes it.
As a normal user everything stays inside the component folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from drtool.environ import child_env
from drtool.errors import SourceError, UsageError
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, debian

PG_ROOT = Path("/usr/lib/postgresql")
_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def postgres_bin_dir() -> Path:
    """The newest installed server binaries: $DRTOOL_POSTGRES_BIN, else /usr/lib/postgresql/<major>/bin, else PATH.

    Debian keeps server binaries off PATH (one folder per major version), so look there first.
    """
    override = os.environ.get("DRTOOL_POSTGRES_BIN")
    if override:
        candidates = [Path(override)]
    else:
        versions = sorted(PG_ROOT.glob("*/bin"), key=_major_version, reverse=True)
        on_path = shutil.which("initdb")
        candidates = versions + ([Path(on_path).parent] if on_path else [])
    for bin_dir in candidates:
        if (bin_dir / "initdb").is_file() and (bin_dir / "postgres").is_file():
            return bin_dir
    raise SourceError(
        "PostgreSQL server binaries (initdb, postgres) not found",
        "apt-get install postgresql, or set DRTOOL_POSTGRES_BIN to their folder",
    )


def _major_version(bin_dir: Path) -> float:
    try:
        return float(bin_dir.parent.name)
    except ValueError:
        return 0.0


@dataclasses.dataclass
class PostgresServer(Component):
    """PostgreSQL on a free port of 127.0.0.1 only, trusting its database user ``db_user`` (a lab, not prod)."""

    kind = "postgres"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [debian("postgres", "postgresql", lambda: str(postgres_bin_dir() / "postgres"))]

    port: int = 0
    db_user: str = "drtool"
    os_user: str = "postgres"  # who runs the server when we are root
    run_dir: str = ""  # holds data/ and socket/; chosen at first start

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()

    @property
    def data_dir(self) -> Path:
        return Path(self.run_dir) / "data"

    @property
    def socket_dir(self) -> Path:
        return Path(self.run_dir) / "socket"

    def _drop_to(self) -> pwd.struct_passwd | None:
        """The account to run server programs as: ``os_user`` when we are root, else None (ourselves)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(self.os_user)
        except KeyError:
            raise SourceError(
                f"running as root, but there is no {self.os_user!r} OS user to run PostgreSQL as",
                "create an unprivileged user (useradd --system postgres) or run the lab as a normal user",
            ) from None

    def _prepare_run_dir(self, owner: pwd.struct_passwd | None) -> None:
        if not self.run_dir:
            self.run_dir = (
                str(self.path)
                if owner is None
                else tempfile.mkdtemp(
                    prefix=f"drtool-pg-{self.name}-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None
                )
            )
        for folder in (Path(self.run_dir), self.socket_dir):
            folder.mkdir(mode=0o700, exist_ok=True)
            if owner is not None:
                os.chown(folder, owner.pw_uid, owner.pw_gid)
        link = self.path / "data"
        if owner is not None and not link.exists():
            link.symlink_to(self.data_dir)  # so a person finds the data from the lab folder

    def _run_as(self, owner: pwd.struct_passwd | None, argv: list[str], what: str) -> None:
        """Run a server-side program (initdb) to completion, as ``owner`` when given."""
        drop = {} if owner is None else {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        env = child_env({} if owner is None else {"HOME": owner.pw_dir})
        result = subprocess.run(
            argv, cwd=self.run_dir, env=env, capture_output=True, text=True, timeout=300, check=False, **drop
        )
        if result.returncode != 0:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SourceError(f"{what} for postgres {self.name} failed: {last[0]}", f"data folder {self.data_dir}")

    def _initdb(self, bin_dir: Path, owner: pwd.struct_passwd | None) -> None:
        # --no-sync and the fsync=off below: a lab database is disposable, and syncing makes CI seconds slower
        self._run_as(
            owner,
            [
                str(bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.db_user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )

    def argv(self, bin_dir: Path) -> list[str]:
        return [
            str(bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={self.socket_dir}",
            "-c",
            "fsync=off",
        ]

    def start(self, timeout: float = 60.0) -> None:
        bin_dir = postgres_bin_dir()
        owner = self._drop_to()
        self.path.mkdir(parents=True, exist_ok=True)
        self._prepare_run_dir(owner)
        fresh = not (self.data_dir / "PG_VERSION").exists()
        if fresh:
            self._initdb(bin_dir, owner)
        self.pid = process.spawn(
            self.argv(bin_dir), self.log_path, cwd=Path(self.run_dir), user=owner.pw_name if owner else None
        )
        process.wait_until(self.healthy, timeout, f"postgres {self.name} on 127.0.0.1:{self.port}", self.log_path)
        if fresh:
            self.create_database(self.db_user)  # a default database named like the user, as psql expects

    def stop(self) -> None:
        """Fast shutdown (SIGINT): ends open sessions and exits cleanly.

        The default SIGTERM is PostgreSQL's "smart" shutdown, which waits for every client to disconnect:
        an idle connection pool in a test would hold it until the SIGKILL fallback.
        """
        if self.running() and self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            with contextlib.suppress(SourceError):
                process.wait_until(lambda: not self.running(), 30.0, f"postgres {self.name} shutdown")
        super().stop()

    def purge(self) -> None:
        """Stop and delete the data; needed when it lives outside the component folder (running as root)."""
        self.stop()
        if self.run_dir and Path(self.run_dir) != self.path:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def healthy(self) -> bool:
        if not self.running():
            return False
        argv = [
            str(postgres_bin_dir() / "pg_isready"),
            "-q",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            self.db_user,
            "-d",
            "postgres",
            "-t",
            "2",
        ]
        return subprocess.run(argv, capture_output=True, timeout=10, check=False, env=child_env()).returncode == 0

    def url(self, dbname: str | None = None) -> str:
        """A SQLAlchemy URL for ``dbname`` (default: the database named like the user)."""
        return f"postgresql+psycopg2://{self.db_user}@127.0.0.1:{self.port}/{dbname or self.db_user}"

    def create_database(self, name: str) -> None:
        """Create an empty database ``name`` (lowercase letters, digits, underscores) owned by ``db_user``."""
        if not _DB_NAME.match(name):
            raise UsageError(f"invalid database name {name!r}", "use lowercase letters, digits and underscores")
        argv = [str(postgres_bin_dir() / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.db_user, name]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=child_env())
        if result.returncode != 0:
            raise SourceError(
                f"creating database {name} in postgres {self.name} failed: {result.stderr.strip() or result.returncode}"
            )

    def env(self) -> dict[str, str]:
        return {"DRTOOL_TEST_POSTGRES_URL": self.url()}

    def describe(self) -> str:
        return f"postgresql://{self.db_user}@127.0.0.1:{self.port}/{self.db_user}"
