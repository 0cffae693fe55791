"""The lab: real servers (etcd, MinIO, PostgreSQL, ...) started on loopback, shared by `drtool lab`, the demo and tests."""
