"""MLflow's REST API (``/api/2.0/mlflow``), as much of it as a registry backup and restore needs.

Plain HTTP with ``requests`` rather than the ``mlflow`` package: the plugin then runs wherever drtool runs,
without MLflow's hundreds of megabytes of dependencies. Authentication follows MLflow's own client
variables, read from the environment only (never from settings, which may come from argv):
``MLFLOW_TRACKING_TOKEN`` (bearer) or ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` (basic).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from drtool.errors import NotFound, SourceError, UsageError

Obj = dict[str, Any]
API = "/api/2.0/mlflow/"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
PAGE = 1000  # the largest max_results the registry search endpoints accept


class MlflowError(SourceError):
    """The server answered with an MLflow error (``error_code`` kept for callers that expect some)."""

    def __init__(self, message: str, hint: str | None, code: str) -> None:
        super().__init__(message, hint)
        self.code = code


class MlflowClient:
    """One MLflow tracking server; every failure becomes a one-line ``SourceError`` naming it."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        if not url or not url.startswith(("http://", "https://")):
            raise UsageError(f"MLflow url {url!r} is not an http(s) URL", "set url=http://HOST:PORT (the tracking URI)")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy from the environment between drtool and its server
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        elif user and password:
            self.session.auth = (user, password)

    def request(self, method: str, path: str, *, stream: bool = False, **kwargs: Any) -> requests.Response:
        """One HTTP call; connection failures and non-2xx answers raise ``SourceError``."""
        try:
            resp = self.session.request(method, self.url + path, timeout=self.timeout, stream=stream, **kwargs)
        except requests.RequestException as exc:
            raise SourceError(
                f"MLflow at {self.url} is unreachable: {type(exc).__name__}",
                "check the url and that `mlflow server` is running",
            ) from None
        if resp.status_code >= 300:
            try:
                body = resp.json()
            except ValueError:
                body = {}
            code = str(body.get("error_code") or resp.status_code)
            message = str(body.get("message") or resp.text[:200] or resp.reason).splitlines()[0]
            raise MlflowError(f"MLflow {method} {path.split('?')[0]} failed: {code}: {message}", None, code)
        return resp

    def call(self, method: str, endpoint: str, **kwargs: Any) -> Obj:
        """A registry/tracking endpoint (``registered-models/get``, ...); JSON in ``json`` or ``params``."""
        resp = self.request(method, API + endpoint, **kwargs)
        return resp.json() if resp.content else {}

    def get(self, endpoint: str, **params: Any) -> Obj:
        return self.call("GET", endpoint, params=params)

    def post(self, endpoint: str, body: Mapping[str, Any]) -> Obj:
        return self.call("POST", endpoint, json=dict(body))

    def exists(self, endpoint: str, **params: Any) -> Obj | None:
        """``get`` that returns None for RESOURCE_DOES_NOT_EXIST instead of raising."""
        try:
            return self.get(endpoint, **params)
        except MlflowError as exc:
            if exc.code in ("RESOURCE_DOES_NOT_EXIST", "404"):
                return None
            raise

    def pages(self, endpoint: str, key: str, **params: Any) -> Iterator[Obj]:
        """Every item of a paged search (``next_page_token``)."""
        token = None
        while True:
            page = self.get(endpoint, max_results=PAGE, **params, **({"page_token": token} if token else {}))
            yield from page.get(key) or []
            token = page.get("next_page_token")
            if not token:
                return

    # --- the registry -------------------------------------------------------------------------------

    def models(self) -> Iterator[Obj]:
        return self.pages("registered-models/search", "registered_models")

    def model(self, name: str) -> Obj | None:
        found = self.exists("registered-models/get", name=name)
        return found["registered_model"] if found else None

    def versions(self, name: str) -> list[Obj]:
        """Every (not deleted) version of model ``name`` in ascending order, with tags (aliases are the model's)."""
        quoted = name.replace("\\", "\\\\").replace("'", "\\'")
        listed = self.pages("model-versions/search", "model_versions", filter=f"name='{quoted}'")
        return sorted(listed, key=lambda v: int(v["version"]))

    def version(self, name: str, version: str | int) -> Obj | None:
        found = self.exists("model-versions/get", name=name, version=str(version))
        return found["model_version"] if found else None

    def wait_ready(self, name: str, version: str, timeout: float = 120.0) -> Obj:
        """Poll a new version until MLflow says READY (FAILED_REGISTRATION raises)."""
        deadline = time.monotonic() + timeout
        while True:
            mv = self.version(name, version) or {}
            status = mv.get("status")
            if status == "READY":
                return mv
            if status == "FAILED_REGISTRATION" or time.monotonic() > deadline:
                raise SourceError(
                    f"model {name} version {version} is {status or 'missing'} in {self.url}",
                    mv.get("status_message") or "check the MLflow server log",
                )
            time.sleep(0.2)

    # --- tracking -----------------------------------------------------------------------------------

    def run(self, run_id: str) -> Obj | None:
        found = self.exists("runs/get", run_id=run_id)
        return found["run"] if found else None

    def experiment(self, experiment_id: str) -> Obj | None:
        found = self.exists("experiments/get", experiment_id=experiment_id)
        return found["experiment"] if found else None

    def experiment_by_name(self, name: str) -> Obj | None:
        found = self.exists("experiments/get-by-name", experiment_name=name)
        return found["experiment"] if found else None


def tag_map(obj: Mapping[str, Any]) -> dict[str, str]:
    """MLflow's ``[{"key", "value"}]`` tag lists (or a tags dict) as a plain dict."""
    tags = obj.get("tags") or []
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    return {t["key"]: t.get("value", "") for t in tags}


def require_server(client: MlflowClient) -> None:
    """Fail early, with one clear line, when nothing answers at the URL (before any artifact is opened)."""
    try:
        client.request("GET", "/health")
    except MlflowError as exc:
        raise NotFound(f"{client.url} does not look like an MLflow server: {exc.message}", "check the url") from None
