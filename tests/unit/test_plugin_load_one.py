"""`drtool backup -p NAME` and `drtool restore ... -p NAME` load only the named plugin (``load_one``), not
every installed one: the others' imports (boto3, the Kubernetes client, hvac, ...) cost each such process
about 0.25 CPU-s (docs/performance.md, image copy). ``DRTOOL_PLUGINS`` still decides what may load.
A fresh interpreter each time: an import made by an earlier test must not hide one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
from drtool.errors import NotFound
from drtool.plugin.manager import load_one
try:
    name = load_one(sys.argv[1]).name
except NotFound as exc:
    name = "not found: " + exc.message
print(json.dumps({"name": name, "loaded": sorted(m for m in sys.modules if m.startswith("drtool_plugins."))}))
"""


def probe(name: str, allowed: str = "") -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "DRTOOL_PLUGINS"} | (
        {"DRTOOL_PLUGINS": allowed} if allowed else {}
    )
    done = subprocess.run([sys.executable, "-c", PROBE, name], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_one_plugin_is_loaded_without_the_others() -> None:
    result = probe("images")
    assert result["name"] == "images"
    others = [m for m in result["loaded"] if not m.startswith("drtool_plugins.images")]  # type: ignore[attr-defined]
    assert others == []


def test_a_plugin_drtool_plugins_leaves_out_is_not_loaded() -> None:
    result = probe("images", allowed="files")
    assert result["name"] == "not found: no plugin named 'images'"
    loaded = {m.split(".")[1] for m in result["loaded"]}  # type: ignore[attr-defined]
    assert loaded == {"files"}  # what get_plugin's registry loaded, to name the installed plugins
