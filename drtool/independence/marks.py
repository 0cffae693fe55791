"""How a plugin marks a dependency that the analysis must read in a special way.

``Dependency`` (the plugin contract) carries free text; these two conventions give that text a meaning
without changing the contract:

- a ``purpose`` starting with ``BLOCKS_RESTORE`` names something the restore itself cannot get past when it
  is missing (an admission webhook whose in-cluster Service does not exist yet rejects every matching
  write), so the report says the restore is blocked, not only that the restored system is degraded;
- an ``address`` starting with ``PROVISIONER`` is a storage provisioner's name (a CSI driver), not a
  network address: where its volumes live decides whether it shares the cluster's fate.
"""

from __future__ import annotations

BLOCKS_RESTORE = "blocks the restore: "
PROVISIONER = "provisioner:"
