"""The lab (import name ``drtool_lab``): real servers (etcd, MinIO, PostgreSQL, ...) on loopback for `drtool lab`,
the demo, rehearsals and tests, and each plugin's lab support (``plugins/``, the ``drtool.lab`` group).

Outside the product: nothing in ``drtool`` or ``drtool_plugins`` imports it, the container image is built
without it, and its commands reach `drtool` through the ``drtool.commands`` group (docs/lab.md)."""
