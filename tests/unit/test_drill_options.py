"""`drtool drill` for bad-write, gpu-pool-lost and registry-lost: what each needs is asked for in one line, before any
cluster, registry or store is touched, and neither may break something that is not a lab unprompted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.core import Cli, assert_clean_error

PLANS = Path(__file__).resolve().parents[2] / "restore-plans"


def kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "cluster.kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gpu-pool-lost"], "gpu-pool-lost needs --pool LOST=REMAINING and --queue NAMESPACE/LOCALQUEUE"),
        (["gpu-pool-lost", "--pool", "l4", "--queue", "team-speech/speech-queue"], "gpu-pool-lost needs --pool"),
        (["gpu-pool-lost", "--pool", "l4=a100", "--queue", "speech-queue"], "gpu-pool-lost needs --pool"),
        (["bad-write", "--plan", str(PLANS / "bad-write-pitr.yaml")], "bad-write needs --namespace and --plan"),
        (["registry-lost", "--plan", str(PLANS / "registry-restore.yaml")], "registry-lost needs --registry HOST:PORT"),
        (["registry-lost", "--registry", "127.0.0.1:5000"], "registry-lost needs --plan"),
        (["registry-lost", "--registry", "registry.example.com:5000", "--plan", str(PLANS / "registry-restore.yaml")],
         "refusing to wipe registry registry.example.com:5000: not a lab"),
    ],
)  # fmt: skip
def test_each_scenario_asks_for_what_it_needs_in_one_line(
    cli: Cli, tmp_path: Path, args: list[str], message: str
) -> None:
    store = tmp_path / "store"  # empty: every refusal comes before the store is read
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")  # a lab address nothing listens on
    proc = cli("--store", str(store), "drill", *args, "--kubeconfig", config)
    assert_clean_error(proc, 2, message)


def test_gpu_pool_lost_refuses_a_cluster_that_is_not_a_lab(cli: Cli, tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "https://prod.example.com:6443")
    proc = cli("drill", "gpu-pool-lost", "--pool", "l4=a100", "--queue", "team-speech/speech-queue",
               "--kubeconfig", config)  # fmt: skip
    assert_clean_error(proc, 2, "refusing to drill prod.example.com: not a lab")
