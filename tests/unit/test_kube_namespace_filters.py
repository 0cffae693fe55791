"""The namespaces no backup or follow selects, whatever the filters say (drtool/kube/skips.py)."""

from __future__ import annotations

import pytest

from drtool.kube.settings import Filters
from drtool.kube.skips import STANDBY_NAMESPACE


@pytest.mark.parametrize(
    "source",
    [{}, {"include_namespaces": "*"}, {"include_namespaces": STANDBY_NAMESPACE}, {"default_skips": "false"}],
)
def test_the_standby_namespace_is_never_selected(source: dict[str, str]) -> None:
    filters = Filters.from_mapping(source)
    assert not filters.namespace_selected(STANDBY_NAMESPACE)
    assert filters.namespace_selected("drtool-standby-app") == (source.get("include_namespaces") != STANDBY_NAMESPACE)
