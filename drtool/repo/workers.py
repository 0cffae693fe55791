"""How many threads seal and upload (or fetch and open) chunks by default.

The work is I/O bound, so more threads than cores, within reason. The store's sessions, its check and
prune take this default; a command line can give another number.
"""

from __future__ import annotations

import os

DEFAULT_WORKERS = max(4, min(16, 2 * (os.cpu_count() or 2)))
