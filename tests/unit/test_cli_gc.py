"""The CLI keeps the garbage collector off the data path (drtool/memory.py, ``fewer_collections``)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, sys
from drtool.cli.main import main
sys.argv = ["drtool", "version"]
try:
    main()
except SystemExit:
    pass
print(gc.get_threshold()[0], gc.get_freeze_count())
"""


def test_cli_freezes_its_imports_and_collects_less_often() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    threshold, frozen = map(int, out.split()[-2:])
    assert threshold == 100_000  # CPython's default is 700
    assert frozen > 10_000, frozen  # the imported modules' objects: not traversed by full collections
