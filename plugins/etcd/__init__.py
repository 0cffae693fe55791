"""The etcd plugin: a consistent snapshot of one etcd cluster, restored into a NEW member.

Source settings (a mapping; each falls back to the environment variable in brackets, which is what
``drtool lab`` exports):

- ``endpoints`` [ETCD_ENDPOINTS]: list or comma-separated string; the snapshot is taken from the first
  endpoint that answers (ONE endpoint: a snapshot is one member's database).
- ``cacert``, ``cert``, ``key`` [ETCD_CACERT, ETCD_CERT, ETCD_KEY]: PEM files for (mutual) TLS.
- ``timeout`` [ETCD_TIMEOUT]: seconds to wait for a connection or for the next bytes of a reply (10).

Restore target settings: ``data_dir`` (required; must be missing or empty), ``name`` (member name,
"restored"), ``initial_cluster_token`` (generated when absent: a restore is a NEW cluster), ``peer_url`` /
``peer_port``, ``client_url`` / ``client_port``, ``start`` (start a health-checked etcd on the restored
data, the lab's EtcdServer), ``tls`` (that etcd serves clients over mutual TLS), ``component_dir`` or
``lab_dir`` (where that etcd keeps its log and certificates). Verify also reads ``endpoints``/TLS files of
the target (default: what the restore recorded) and ``compare_with`` (source settings, to compare every
key with the source at the snapshot revision).

Restore options: ``bump_revision`` (default 1000000000; 0 disables), ``require_bump_revision`` (fail
when etcdutl cannot bump), ``etcdutl`` (path; or DRTOOL_ETCDUTL). Why the bump matters for Kubernetes:
see ``restore.py``.

Continuous backup (docs/etcd.md; ``drtool.plugin.contract.FollowSupport``): ``follow`` writes a full and
then deltas of the watch stream (follow.py); a restore with ``--at`` replays them to a revision or time
(pitr.py, replay.py); ``fold`` is `drtool compact`.
"""

from __future__ import annotations

from drtool.plugin.contract import BasePlugin

from . import backup as _backup
from . import deps as _deps
from . import follow as _follow
from . import pitr as _pitr
from . import verify as _verify
from .schema import SCHEMA

__all__ = ["EtcdPlugin"]


class EtcdPlugin(BasePlugin):
    """Implements ``drtool.plugin.contract.Plugin`` and ``FollowSupport`` for etcd v3 (3.4+, tested with 3.5)."""

    name = "etcd"
    description = "etcd v3 snapshot (Maintenance.Snapshot), restored with etcdutl into a new member"
    schema = SCHEMA
    discover = staticmethod(_backup.discover)
    backup = staticmethod(_backup.backup)
    restore = staticmethod(_pitr.run_restore)
    verify = staticmethod(_verify.run_verify)
    dependencies = staticmethod(_deps.dependencies)
    follow = staticmethod(_follow.follow)
    fold = staticmethod(_pitr.fold)
