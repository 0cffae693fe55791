"""The lab: real servers (etcd, MinIO, PostgreSQL, ...) on loopback for `drtool lab`, the demo and tests."""
