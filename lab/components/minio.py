"""A single-drive MinIO server, built from the pinned upstream Go module: the lab's S3 store.

It is the S3 endpoint the store backend is tested against, and an object store the lab platform keeps
checkpoints in, so it has to be the real server (conditional writes, Object Lock, pagination), not a fake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drtool_lab.build import MINIO_MODULE, MINIO_VERSION, binary_path, minio_binary

from drtool.files import replace_private
from drtool.servers import pki, process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, go_installed

if TYPE_CHECKING:
    from botocore.client import BaseClient

REGION = "us-east-1"


def aws_credentials_file(path: Path, access_key: str, secret_key: str) -> Path:
    """Write ``path`` (mode 0600, section ``[default]``) in the ``~/.aws/credentials`` format; return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_private(path, f"[default]\naws_access_key_id = {access_key}\naws_secret_access_key = {secret_key}\n")
    return path


@dataclasses.dataclass
class MinioServer(Component):
    """MinIO on two free loopback ports (S3 API, web console) with root credentials fixed at creation.

    The credentials are generated once and kept in the component's state, so a restarted server (`drtool lab
    up` after a reboot) accepts the same pair that scripts and saved environments were already given.
    They are lab-only secrets, so they go into ``env()`` for clients but never into ``describe()``.

    With ``tls`` the S3 API serves https with a certificate for 127.0.0.1 from a CA of the server's own
    (``ca_file``, which ``env()`` names in AWS_CA_BUNDLE and ``client()`` trusts): what an S3 endpoint in
    production looks like, for what botocore does differently over TLS.
    """

    kind = "minio"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [go_installed("minio", MINIO_MODULE, MINIO_VERSION, binary_path("minio", MINIO_VERSION))]

    api_port: int = 0
    console_port: int = 0
    root_user: str = ""
    root_password: str = ""
    tls: bool = False

    def __post_init__(self) -> None:
        self.api_port = self.api_port or process.free_port()
        self.console_port = self.console_port or process.free_port()
        self.root_user = self.root_user or f"lab-{secrets.token_hex(4)}"
        self.root_password = self.root_password or secrets.token_urlsafe(24)

    @property
    def data_dir(self) -> str:
        return str(self.path / "data")

    @property
    def api_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.api_port}"

    @property
    def certs_dir(self) -> Path:
        return self.path / "certs"

    @property
    def ca_file(self) -> Path:
        return self.path / "pki" / "ca.crt"

    def _ensure_certs(self) -> None:
        """The CA and MinIO's serving pair (``certs/public.crt``, ``certs/private.key``), made once."""
        if (self.certs_dir / "private.key").exists():
            return
        served = pki.issue(
            pki.make_ca(self.ca_file.parent, f"drtool lab {self.name} CA"), self.certs_dir, "public", "minio"
        )
        served.key.rename(self.certs_dir / "private.key")

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console_port}"

    def argv(self) -> list[str]:
        return [
            str(minio_binary()),
            "server",
            self.data_dir,
            "--address",
            f"127.0.0.1:{self.api_port}",
            "--console-address",
            f"127.0.0.1:{self.console_port}",
            *(["--certs-dir", str(self.certs_dir)] if self.tls else []),
        ]

    def start(self, timeout: float = 60.0) -> None:
        minio_binary()  # may build first (minutes): do it before the health-check clock starts
        self.path.mkdir(parents=True, exist_ok=True)
        if self.tls:
            self._ensure_certs()
        env = {
            "MINIO_ROOT_USER": self.root_user,
            "MINIO_ROOT_PASSWORD": self.root_password,
            "MINIO_REGION": REGION,
            "MINIO_UPDATE": "off",  # never phone home from a lab
        }
        self.pid = process.spawn(self.argv(), self.log_path, env=env)
        process.wait_until(self.healthy, timeout, f"minio {self.name} at {self.api_url}", self.log_path)

    def healthy(self) -> bool:
        if not self.running():
            return False
        if not self.tls:
            return process.http_ok(f"{self.api_url}/minio/health/live")
        context = ssl.create_default_context(cafile=str(self.ca_file))
        return process.http_ok(f"{self.api_url}/minio/health/live", context)

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.api_url,
            "AWS_ACCESS_KEY_ID": self.root_user,
            "AWS_SECRET_ACCESS_KEY": self.root_password,
            "AWS_DEFAULT_REGION": REGION,
            **({"AWS_CA_BUNDLE": str(self.ca_file)} if self.tls else {}),
        }

    def describe(self) -> str:
        return f"{self.api_url} (console :{self.console_port})"

    def credentials_file(self) -> Path:
        """The root keys in an AWS-style credentials file in this server's folder, for plugin settings that
        name one (checkpoints' ``credentials_file``): keys never go into settings themselves."""
        return aws_credentials_file(self.path / "s3-credentials", self.root_user, self.root_password)

    def client(self) -> BaseClient:
        """A boto3 S3 client with the root credentials, independent of the caller's AWS_* environment.

        Made once per object and reused: building a boto3 session costs a tenth of a second or more,
        which adds up over a test session creating a bucket per test. (boto3 clients are thread-safe.)
        """
        cached = self.__dict__.get("_client")  # not a dataclass field: never part of the saved state
        if cached is None:
            import boto3  # lazy: importing boto3 costs a third of a second on every `drtool` start
            from botocore.config import Config

            cached = self.__dict__["_client"] = boto3.session.Session().client(
                "s3",
                endpoint_url=self.api_url,
                aws_access_key_id=self.root_user,
                aws_secret_access_key=self.root_password,
                region_name=REGION,
                verify=str(self.ca_file) if self.tls else None,
                config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "total_max_attempts": 3}),
            )
        return cached

    def create_bucket(self, bucket: str, *, object_lock: bool = False) -> None:
        """Create ``bucket`` (a no-op if this server already has it); Object Lock can only be enabled here."""
        client = self.client()
        kwargs: dict[str, Any] = {"Bucket": bucket}
        if object_lock:
            kwargs["ObjectLockEnabledForBucket"] = True
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(**kwargs)
