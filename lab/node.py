"""The lab's node for the pods drtool's plan checks create (``training-resumes``'s trainer Job).

kwok's nodes run no container, and a lab has no kubelet: for the pods labelled ``drtool.dev/check`` this
plays one, as tests/plugins/test_shards.py does for the sharded backup's workers. Each container of such a pod
runs as a local process from the pod as the API server returns it: its command and args (``python``
being this interpreter, as the image's PATH would resolve it), and **exactly the pod's environment** —
its ``env`` values and the keys of the Secrets its ``envFrom`` names, read through the API as a kubelet
does — plus only what the node itself adds (``extra_env``: the living lab's node tells the lab trainer
where the lab is). Nothing of the restoring drtool's environment reaches it. The file at the container's
``terminationMessagePath`` is a host file (the kubelet's mount); what the container wrote there, at most
4 KiB, goes into the pod's status with its exit code, and the pod ends Succeeded or Failed, which the Job
controller counts.

``python -m drtool_lab.node --kubeconfig FILE --health-port N`` is the living lab's ``lab-node``
component (lab/components/lab_node.py); tests use ``LabNode.run_pod`` directly.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import http.server
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drtool_plugins.checkpoints.resume_check import CHECK_LABEL

from drtool.kube.client import ApiError, KubeClient

SELECTOR = CHECK_LABEL  # the pods this node runs: those of drtool's plan checks
MESSAGE_LIMIT = 4096  # what a kubelet keeps of a termination message
POLL_S = 0.5
Obj = dict[str, Any]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LabNode:
    """Runs the containers of the labelled pods of one cluster as local processes (see the module docstring)."""

    def __init__(self, client: KubeClient, extra_env: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.extra_env = dict(extra_env or {})
        self._started: set[str] = set()  # pod uids already taken

    def pending(self) -> list[Obj]:
        """The labelled pods no container of which was started yet."""
        pods = self.client.get("/api/v1/pods", {"labelSelector": SELECTOR}).get("items") or []
        return [
            p for p in pods
            if (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and not p["metadata"].get("deletionTimestamp") and p["metadata"]["uid"] not in self._started
        ]  # fmt: skip

    def environment(self, pod: Obj, container: Obj) -> dict[str, str]:
        """The container's environment as a kubelet builds it: ``envFrom`` Secrets, then ``env`` values."""
        namespace = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            name = (source.get("secretRef") or {}).get("name")
            if name:
                secret = self.client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
                env |= {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        env |= {var["name"]: str(var.get("value", "")) for var in container.get("env") or []}
        return env | self.extra_env

    def run_pod(self, pod: Obj) -> dict[str, int]:
        """Run every container of ``pod`` to its end and report it in the pod's status; name -> exit code."""
        self._started.add(pod["metadata"]["uid"])
        try:
            envs = {c["name"]: self.environment(pod, c) for c in pod["spec"]["containers"]}
        except ApiError as exc:  # a Secret its envFrom names is missing: the container cannot be created
            message = f"CreateContainerConfigError: {exc.message}"
            failed = {"exitCode": 1, "reason": "CreateContainerConfigError", "message": message, "finishedAt": _now()}
            self._status(pod, "Failed", {c["name"]: {"terminated": failed} for c in pod["spec"]["containers"]})
            return {c["name"]: 1 for c in pod["spec"]["containers"]}
        with tempfile.TemporaryDirectory(prefix="drtool-lab-node-") as tmp:
            running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
            for container in pod["spec"]["containers"]:
                log = Path(tmp) / f"{container['name']}.termination-log"
                log.touch()
                mount = container.get("terminationMessagePath") or "/dev/termination-log"
                argv = [*(container.get("command") or []), *(container.get("args") or [])]
                argv = [str(log) if a == mount else a for a in argv]
                argv = [sys.executable, *argv[1:]] if argv and argv[0] == "python" else argv
                proc = subprocess.Popen(
                    argv, env=envs[container["name"]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                running[container["name"]] = (proc, log)
            self._status(pod, "Running", {n: {"running": {"startedAt": _now()}} for n in running})
            codes: dict[str, int] = {}
            ended: dict[str, Obj] = {}
            for name, (proc, log) in running.items():
                _, err = proc.communicate()
                codes[name] = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
                message = log.read_bytes()[-MESSAGE_LIMIT:].decode(errors="replace")
                if codes[name] != 0 and not message:
                    message = err.decode(errors="replace")[-MESSAGE_LIMIT:]  # FallbackToLogsOnError
                reason = "Completed" if codes[name] == 0 else "Error"
                ended[name] = {"terminated": {"exitCode": codes[name], "reason": reason, "message": message,
                                              "startedAt": _now(), "finishedAt": _now()}}  # fmt: skip
        self._status(pod, "Succeeded" if not any(codes.values()) else "Failed", ended)
        return codes

    def _status(self, pod: Obj, phase: str, states: Mapping[str, Obj]) -> None:
        images = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        statuses = [
            {"name": n, "image": images[n], "imageID": "", "ready": phase == "Running", "restartCount": 0, "state": s}
            for n, s in states.items()
        ]
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        body = json.dumps({"status": {"phase": phase, "containerStatuses": statuses}}).encode()
        try:
            self.client.request("PATCH", path, body=body, content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status != 404:  # the Job (and its pod) deleted meanwhile: nothing left to report to
                raise

    def serve(self, stop: threading.Event) -> None:
        """Run each labelled pod as it appears (each in a thread of its own) until ``stop`` is set."""
        while not stop.is_set():
            for pod in self.pending():
                threading.Thread(target=self.run_pod, args=(pod,), daemon=True).start()
            stop.wait(POLL_S)


def main() -> None:
    from drtool.kube.settings import Connection

    parser = argparse.ArgumentParser(prog="python -m drtool_lab.node", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--health-port", type=int, required=True)
    parser.add_argument("--lab-dir", help="where the lab is: given to the lab trainer (DRTOOL_LAB_DIR)")
    args = parser.parse_args()
    client = KubeClient(Connection.from_mapping({"kubeconfig": args.kubeconfig, "timeout": 30}))
    node = LabNode(client, {"DRTOOL_LAB_DIR": args.lab_dir} if args.lab_dir else {})

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.health_port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Event()
    while True:  # the lab stops it with a signal
        try:
            node.serve(stop)
        except Exception as exc:  # an API server restarting: keep playing the node
            print(f"lab-node: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            time.sleep(1)


if __name__ == "__main__":
    main()
