"""Hostile and broken input, generated: the manifest decoder, the config loader and the plan loader either
accept their input or raise a clean DrtoolError — never another exception (which would be a traceback).

Property-based (hypothesis): arbitrary bytes, arbitrary YAML documents, and mutations of valid documents.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drtool.config import load_settings
from drtool.errors import DrtoolError
from drtool.plans.loader import load_plan
from drtool.repo.manifest import Manifest

# derandomize: the same 150 examples on every run (a failure is reproducible, a pass is not luck)
RUNS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
BACKUP_ID = "20261129T104500Z-1a2b3c"

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=15), children, max_size=5)
    ),
    max_leaves=30,
)
VALID_MANIFEST: dict[str, Any] = {
    "version": 1,
    "id": BACKUP_ID,
    "store_id": "s",
    "started": "2026-11-29T10:45:00Z",
    "finished": "2026-11-29T10:46:00Z",
    "status": "complete",
    "hostname": "h",
    "drtool_version": "0",
}
VALID_PLAN = """\
name: hostile
objectives: {rto: 30m, rpo: 1d}
steps:
  - id: etcd
    uses: etcd
  - id: kube
    uses: kubernetes
    needs: [etcd]
"""


def _decode(raw: bytes) -> None:
    with contextlib.suppress(DrtoolError):
        Manifest.decode(raw, BACKUP_ID)


@RUNS
@given(st.binary(max_size=2048))
def test_manifest_decoder_on_arbitrary_bytes(raw: bytes) -> None:
    _decode(raw)


@RUNS
@given(documents)
def test_manifest_decoder_on_arbitrary_json(doc: Any) -> None:
    _decode(zstandard.ZstdCompressor().compress(json.dumps(doc).encode()))


@RUNS
@given(st.dictionaries(st.sampled_from([*sorted(VALID_MANIFEST), "artifacts", "plugins", "tags"]), documents))
def test_manifest_decoder_on_mutated_valid_manifests(changes: dict[str, Any]) -> None:
    _decode(zstandard.ZstdCompressor().compress(json.dumps(VALID_MANIFEST | changes).encode()))


def _load_config(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(text)
        with contextlib.suppress(DrtoolError):
            load_settings(config=str(path))


@RUNS
@given(st.text(max_size=400))
def test_config_loader_on_arbitrary_text(text: str) -> None:
    _load_config(text)


@RUNS
@given(st.dictionaries(st.sampled_from(["store", "catalog", "sources", "backup_sets", "other"]), documents))
def test_config_loader_on_arbitrary_documents(doc: dict[str, Any]) -> None:
    _load_config(yaml.safe_dump(doc))


def _load_plan(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.yaml"
        path.write_text(text)
        with contextlib.suppress(DrtoolError):
            load_plan(path)


@RUNS
@given(st.text(max_size=400))
def test_plan_loader_on_arbitrary_text(text: str) -> None:
    _load_plan(text)


@RUNS
@given(documents)
def test_plan_loader_on_arbitrary_documents(doc: Any) -> None:
    _load_plan(yaml.safe_dump(doc))


@RUNS
@given(
    st.dictionaries(
        st.sampled_from(["name", "source", "target", "objectives", "steps", "checks", "waivers", "parallelism"]),
        documents,
    )
)
def test_plan_loader_on_mutated_valid_plans(changes: dict[str, Any]) -> None:
    _load_plan(yaml.safe_dump(yaml.safe_load(VALID_PLAN) | changes))


def test_enormous_and_deep_values_are_refused_cleanly() -> None:
    """A 20 MB description or a 5000-deep nesting is an input error, not a crash or a hang."""
    _load_plan(VALID_PLAN.replace("name: hostile", "name: hostile\ndescription: " + "x" * 20_000_000))
    _load_plan("name: deep\nsteps: " + "[" * 5000 + "]" * 5000 + "\n")
    _load_config("sources: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")
