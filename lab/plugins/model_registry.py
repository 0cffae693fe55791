"""The model-registry plugin's ``LabSupport``: a lab MLflow filled with a realistic registry, and an empty one.

The seed goes through MLflow's REST API and artifact proxy only (as a training job would), so it needs no
``mlflow`` import. Each model version is a real MLflow model: an ``MLmodel`` file with a ``python_function``
flavor whose loader is this module (``_load_pyfunc``), so ``mlflow.pyfunc.load_model`` on a restored copy
really loads and predicts. Content per ``scale``:
- ``fraud-detector``: versions 1-4 of a run each, version 2 deleted (a numbering gap), stages
  Production/Staging/Archived, aliases ``champion`` and ``challenger``, model and version tags;
- ``tokenizer``: 2 versions, alias ``prod``, one version without a run, its files written straight to S3
  (``s3://`` source) rather than through the proxy;
- ``scale - 1`` more models ``extra-<n>`` with one version each.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml
from drtool_lab.components.mlflow import MlflowServer
from drtool_lab.lab import Lab
from drtool_plugins.model_registry.client import ARTIFACTS_API, MlflowClient, Obj

WEIGHTS = "weights.json"


class Scorer:
    """The seeded models' prediction: a weighted sum of each row's values (a model that needs no ML library)."""

    def __init__(self, weights: list[float]) -> None:
        self.weights = weights

    def predict(self, rows: Any, params: Any = None) -> list[float]:
        values = rows.values.tolist() if hasattr(rows, "values") else rows
        return [sum(w * float(x) for w, x in zip(self.weights, row, strict=False)) for row in values]


def _load_pyfunc(path: str) -> Scorer:
    """MLflow's custom-loader hook (``loader_module``): ``path`` is the flavor's ``data`` file."""
    return Scorer(json.loads(Path(path).read_text())["weights"])


def model_files(weights: list[float], padding: int) -> dict[str, bytes]:
    """An MLflow model folder: MLmodel, the weights, and a padding blob (realistic sizes for transfer tests)."""
    mlmodel = {
        "flavors": {
            "python_function": {
                "loader_module": __name__,
                "data": WEIGHTS,
                "python_version": "3.11",
                "env": {"virtualenv": "python_env.yaml"},
            }
        },
        "mlflow_version": "3.0.0",
    }
    return {
        "MLmodel": yaml.safe_dump(mlmodel).encode(),
        WEIGHTS: json.dumps({"weights": weights}).encode(),
        "python_env.yaml": b"python: '3.11'\ndependencies: []\n",
        "data/blob.bin": random.Random(len(weights) + padding).randbytes(padding),
    }


class Seeder:
    """Writes the lab registry through MLflow's REST API and artifact proxy, as a training pipeline would."""

    def __init__(self, server: MlflowServer) -> None:
        self.server = server
        self.client = MlflowClient(server.url)

    def upload(self, artifact_uri: str, files: dict[str, bytes]) -> None:
        root = artifact_uri.split(":", 1)[1].strip("/")
        for rel, body in files.items():
            self.client.request("PUT", f"{ARTIFACTS_API}/{root}/{rel}", data=body)

    def run(self, experiment: str, name: str, params: dict[str, str], metrics: dict[str, float]) -> Obj:
        exp = self.client.experiment_by_name(experiment)
        exp_id = (
            exp["experiment_id"]
            if exp
            else self.client.post("experiments/create", {"name": experiment})["experiment_id"]
        )
        info = self.client.post(
            "runs/create", {"experiment_id": exp_id, "run_name": name, "start_time": 1_700_000_000_000}
        )
        run = info["run"]["info"]
        batch = {
            "run_id": run["run_id"],
            "params": [{"key": k, "value": v} for k, v in params.items()],
            "metrics": [{"key": k, "value": v, "timestamp": 1_700_000_100_000, "step": 1} for k, v in metrics.items()],
            "tags": [{"key": "team", "value": "risk"}],
        }
        self.client.post("runs/log-batch", batch)
        self.client.post("runs/update", {"run_id": run["run_id"], "status": "FINISHED", "end_time": 1_700_000_200_000})
        return run

    def version(self, model: str, weights: list[float], padding: int, **extra: Any) -> str:
        run = self.run(
            f"{model}-training", f"{model}-{len(weights)}", {"lr": "0.01", "layers": str(len(weights))}, {"auc": 0.9}
        )
        self.upload(run["artifact_uri"] + "/model", model_files(weights, padding))
        body = {"name": model, "source": run["artifact_uri"] + "/model", "run_id": run["run_id"], **extra}
        return self.client.post("model-versions/create", body)["model_version"]["version"]

    def s3_version(self, model: str, weights: list[float], padding: int) -> str:
        """A version without a run whose files were written to S3 directly (source ``s3://...``)."""
        s3 = self.server.minio().client()
        prefix = f"direct/{model}/{len(weights)}"
        for rel, body in model_files(weights, padding).items():
            s3.put_object(Bucket=self.server.bucket, Key=f"{prefix}/{rel}", Body=body)
        body = {"name": model, "source": f"s3://{self.server.bucket}/{prefix}", "description": "exported by hand"}
        return self.client.post("model-versions/create", body)["model_version"]["version"]

    def seed(self, scale: int) -> None:
        c = self.client
        pad = 64 * 1024 * max(scale, 1)
        tags = [{"key": "owner", "value": "risk-team"}, {"key": "pii", "value": "false"}]
        c.post("registered-models/create", {"name": "fraud-detector", "description": "card fraud", "tags": tags})
        for i in range(1, 5):
            self.version(
                "fraud-detector",
                [float(i), 1.0, 0.5],
                pad,
                description=f"retrain {i}",
                tags=[{"key": "dataset", "value": f"2026-0{i}"}],
            )
        c.call("DELETE", "model-versions/delete", json={"name": "fraud-detector", "version": "2"})
        for version, stage in (("1", "Archived"), ("3", "Production"), ("4", "Staging")):
            body = {"name": "fraud-detector", "version": version, "stage": stage, "archive_existing_versions": False}
            c.post("model-versions/transition-stage", body)
        c.post("registered-models/alias", {"name": "fraud-detector", "alias": "champion", "version": "3"})
        c.post("registered-models/alias", {"name": "fraud-detector", "alias": "challenger", "version": "4"})
        c.post("registered-models/create", {"name": "tokenizer", "description": "BPE tokenizer"})
        self.version("tokenizer", [2.0], pad)
        self.s3_version("tokenizer", [3.0, 1.0], pad)
        c.post("registered-models/alias", {"name": "tokenizer", "alias": "prod", "version": "2"})
        for n in range(1, max(scale, 1)):
            c.post("registered-models/create", {"name": f"extra-{n}"})
            self.version(f"extra-{n}", [float(n)], pad)


class MlflowLab:
    kinds: tuple[str, ...] = ("mlflow",)

    @staticmethod
    def _server(lab: Lab) -> MlflowServer:
        lab.up(MlflowLab.kinds)
        server = lab.first("mlflow")
        assert isinstance(server, MlflowServer)
        return server

    def seed(self, lab: Lab, scale: int = 1) -> dict[str, Any]:
        """Start the lab's MLflow (and MinIO) and register the models above; the source mapping points at it."""
        server = self._server(lab)
        Seeder(server).seed(scale)
        return {
            "url": server.url,
            "s3_endpoint": server.s3_endpoint,
            "s3_credentials_file": str(server.s3_credentials_file()),
        }

    def target(self, lab: Lab) -> dict[str, Any]:
        """The lab's (empty) MLflow; restored files go to its MinIO under ``s3://<bucket>/restored``."""
        server = self._server(lab)
        return {
            "url": server.url,
            "artifacts": f"s3://{server.bucket}/restored",
            "s3_endpoint": server.s3_endpoint,
            "s3_credentials_file": str(server.s3_credentials_file()),
        }
