"""A real `mlflow server` (PyPI ``mlflow``): the lab's model registry, its artifacts in the lab's MinIO.

The server keeps its tracking and registry metadata in a SQLite file in the component folder and proxies
artifacts (``--serve-artifacts``, MLflow's default) into ``s3://<bucket>/<prefix>`` of the lab's MinIO: a
client sees ``mlflow-artifacts:/...`` URIs and never needs S3 credentials, as in a typical platform
install. The MinIO credentials reach the server through its environment only (never its argv).

``mlflow`` is a lab and test dependency (the ``lab`` extra), not a run-time one: the model-registry
plugin speaks the REST API and S3 directly.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from drtool_lab.components.minio import MinioServer, aws_credentials_file

from drtool.errors import SourceError
from drtool.servers import process
from drtool.servers.component import Component
from drtool.servers.provision import Provision, pypi


def mlflow_command() -> list[str]:
    """How to run the server: the ``mlflow`` console script next to this Python, else on PATH."""
    beside = shutil.which("mlflow", path=str(Path(sys.executable).parent))
    found = beside or shutil.which("mlflow")
    if not found:
        raise SourceError("the mlflow server is not installed", "pip install 'drtool[lab]' (or pip install mlflow)")
    return [found]


@dataclasses.dataclass
class MlflowServer(Component):
    """`mlflow server` on a free loopback port; artifacts go to ``artifacts_uri`` in the lab's MinIO.

    ``s3_endpoint`` and the credentials are taken from the lab's MinIO by ``link`` before every start.
    """

    kind = "mlflow"

    @classmethod
    def provisions(cls) -> list[Provision]:
        return [pypi("mlflow", "mlflow", lambda: mlflow_command()[0])]

    port: int = 0
    bucket: str = "mlflow"
    prefix: str = "artifacts"
    minio_component: str = ""
    s3_endpoint: str = ""
    s3_access_key: str = ""
    s3_secret_key: str = ""

    def __post_init__(self) -> None:
        self.port = self.port or process.free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def artifacts_uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def backend_uri(self) -> str:
        return f"sqlite:///{self.path / 'mlflow.db'}"

    def requirements(self) -> tuple[str, ...]:
        return ("minio",)

    def link(self, peers: Mapping[str, Component]) -> None:
        minio = peers.get(self.minio_component) if self.minio_component else None
        minio = minio or next((c for c in peers.values() if isinstance(c, MinioServer)), None)
        if not isinstance(minio, MinioServer):
            raise SourceError(f"mlflow {self.name} has no MinIO for its artifacts", "add a minio to the lab")
        self.minio_component = minio.name
        self.s3_endpoint = minio.api_url
        self.s3_access_key, self.s3_secret_key = minio.root_user, minio.root_password

    def minio(self) -> MinioServer:
        """A MinIO handle with this server's artifact-store settings (for creating its bucket, reading back)."""
        port = int(self.s3_endpoint.rsplit(":", 1)[1])
        return MinioServer(
            name=self.minio_component,
            dir="",
            api_port=port,
            console_port=1,
            root_user=self.s3_access_key,
            root_password=self.s3_secret_key,
        )

    def s3_credentials_file(self) -> Path:
        """An AWS-style credentials file (mode 0600, section ``[default]``) for this server's artifact store.

        Clients that must reach two stores with different keys in one process (a backup from one lab and a
        restore into another) name this file in their settings instead of relying on the AWS_* variables.
        """
        return aws_credentials_file(self.path / "s3-credentials", self.s3_access_key, self.s3_secret_key)

    def argv(self) -> list[str]:
        return [
            *mlflow_command(),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            self.backend_uri,
            "--artifacts-destination",
            self.artifacts_uri,
        ]

    def start(self, timeout: float = 120.0) -> None:
        if not self.s3_endpoint:
            raise SourceError(f"mlflow {self.name} is not linked to a MinIO", "start it through its lab")
        self.path.mkdir(parents=True, exist_ok=True)
        self.minio().create_bucket(self.bucket)
        env = {
            "MLFLOW_S3_ENDPOINT_URL": self.s3_endpoint,
            "AWS_ACCESS_KEY_ID": self.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3_secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            # MLflow 3 otherwise forks a job runner and seven huey consumers (GenAI jobs, not the registry):
            # each imports all of mlflow, which triples start-up time and stop takes the SIGKILL fallback
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
        }
        self.pid = process.spawn(self.argv(), self.log_path, env=env, cwd=self.path)
        process.wait_until(self.healthy, timeout, f"mlflow {self.name} at {self.url}", self.log_path)

    def healthy(self) -> bool:
        return self.running() and process.http_ok(f"{self.url}/health")

    def env(self) -> dict[str, str]:
        return {"MLFLOW_TRACKING_URI": self.url}

    def describe(self) -> str:
        return f"{self.url} (artifacts {self.artifacts_uri})"
