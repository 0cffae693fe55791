"""`drtool --help` and `drtool version` answer without importing what only some commands use.

The CLI's command modules import the library (the store, plans, plugins) and its clients (boto3, the Kubernetes
client, hvac, SQLAlchemy) inside the commands that use them, so the cheap commands do not wait for them
(docs/performance.md, "CLI start-up"). A fresh interpreter each time: an import made by an earlier test
must not hide one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# client libraries no cheap command needs, and the store's own heavy modules
NOT_AT_START = ("boto3", "botocore", "kubernetes", "hvac", "sqlalchemy", "sqlmodel", "mlflow", "numpy", "pyfastcdc")
NOT_AT_START += ("drtool.repo.repository", "drtool.plans.executor", "drtool.plugin.manager", "drtool.backup")
PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["drtool", *sys.argv[1:]]
out, code = io.StringIO(), 0
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module("drtool", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "loaded": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("args", [("--help",), ("version",), ("restore", "--help")])
def test_cheap_commands_import_no_client_library(args: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] in (0, None) and result["out"].strip(), result["out"]
    assert [m for m in NOT_AT_START if m in result["loaded"]] == []
