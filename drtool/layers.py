"""drtool's layers, bottom first: a module imports only from its own layer and the layers below it.

Written once, here. tests/unit/test_boundaries.py reads every module with ``ast`` and checks each import against
this table (imports inside functions and type-only imports count too), checks that no two top-level
packages import each other in a loop, and checks that docs/architecture.md shows the table ``render``
makes (``python -m drtool.layers --write docs/architecture.md`` rewrites it there).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

# import name -> folder, from the checkout's root (setup.py maps plugins/ to drtool_plugins, lab/ to drtool_lab)
ROOTS = {"drtool": "drtool", "drtool_plugins": "plugins", "drtool_lab": "lab"}
BEGIN = "<!-- layers: written by `python -m drtool.layers --write docs/architecture.md` from drtool/layers.py -->"
END = "<!-- end of layers -->"
# entries that stand for a package's ``__init__.py`` alone: the table places its modules one by one
FACES = ("drtool",)


@dataclasses.dataclass(frozen=True)
class Layer:
    name: str
    members: dict[str, str]  # import name of a top-level package or module -> its job


LAYERS = (
    Layer(
        "foundation",
        {
            "drtool": "the package: its version",
            "drtool.layers": "this table of layers",
            "drtool.errors": "every typed error and its exit code",
            "drtool.environ": "which environment variables hold secrets; the scrubbed environment of every child",
            "drtool.log": "logging setup",
            "drtool.progress": "progress reporting on a terminal, silent elsewhere",
            "drtool.memory": "byte budgets that bound what is held in memory",
            "drtool.files": "files on this machine that hold secrets (0600, `O_EXCL`)",
            "drtool.secure_paths": "which files a plan's `*_file` settings may name: never drtool's own secrets",
            "drtool.yamlio": "reading YAML with bounded size and clear errors",
            "drtool.binaries": "finding the server binaries drtool runs (etcd, etcdutl, bao)",
            "drtool.durations": "durations as people write them (`90s`, `1h30m`) and back",
            "drtool.points": "where to restore to: a revision, a time, or the newest (`Point`)",
            "drtool.probe": "whether an address accepts TCP connections (nothing sent)",
        },
    ),
    Layer(
        "crypto, backends and servers",
        {
            "drtool.crypto": "the master key, key slots, Shamir shares, the keys a credential opens",
            "drtool.backends": "bytes by name: a directory or an S3 bucket",
            "drtool.servers": "servers drtool starts and supervises: an etcd member on a restored data directory, "
            "a trial OpenBao (and every lab server's base)",
        },
    ),
    Layer(
        "store",
        {
            "drtool.repo": "the store format: chunks, packs, manifests, key records, chains, job parts, locks, check",
        },
    ),
    Layer(
        "plugin contract",
        {
            "drtool.plugin": "what a plugin implements (`contract`), finding plugins (`manager`), the toolkit "
            "plugins share (settings, paths, archives, OCI registries)",
        },
    ),
    Layer(
        "Kubernetes infrastructure",
        {
            "drtool.kube": "API client, discovery, cleaned objects, apply in dependency order, read-back checks, "
            "the references restored objects carry, a plan's transforms (`transforms.py`) and the holds on AI "
            "workloads and GitOps apps (`holds.py`)",
        },
    ),
    Layer(
        "plugins",
        {
            "drtool_plugins": "the built-in plugins, one package each, registered in the `drtool.plugins` group",
        },
    ),
    Layer(
        "store operations",
        {
            "drtool.backup": "running a backup",
            "drtool.restore": "restoring one plugin's part of a backup, then verifying it",
            "drtool.follow": "continuous backup: a chain of a full and deltas",
            "drtool.compact": "folding a chain's deltas into a new full",
            "drtool.prune": "forgetting backups and deleting what no backup needs",
            "drtool.repair": "`drtool repair index`: the index rebuilt from the packs' own headers",
            "drtool.shards": "sharded backups: N workers, one backup",
            "drtool.velero": "`drtool import velero`: a Velero backup read, checked and written as a kubernetes backup",
            "drtool.retention": "which backups a retention policy keeps",
            "drtool.catalog": "the SQL cache of the store's manifests, and the history of runs and drills",
            "drtool.metrics": "Prometheus metrics of backups and prunes",
        },
    ),
    Layer(
        "plans and analysis",
        {
            "drtool.plans": "restore plans: schema, validation, the DAG executor, approvals, checks",
            "drtool.independence": "recovery independence: what a restore still needs from the failed domain",
            "drtool.report": "reports for people and machines: Markdown, HTML, JSON, SVG",
            "drtool.scheduler": "scheduled backups of backup sets, and their history",
            "drtool.drills": "scenario drills: inject a failure into a lab, recover it with a plan, record actual "
            "RPO and time to service; the drill matrix",
            "drtool.standby": "warm standby: chain links applied to a second cluster from the store alone, held, with "
            "lag metrics; failover (fence, release, checks, RPO and RTO) and failback",
            "drtool.audit": "`drtool audit`: the go-live checklist graded against a live cluster, plans, "
            "checkpoints and drill records",
        },
    ),
    Layer(
        "rehearsal",
        {
            "drtool.rehearsal": "rehearsals: a plan restored into a fresh target with the source unreachable (network "
            "namespace, guard, relays, confinement), RTO to service and RPO measured; the target-provider interface "
            "(`drtool.rehearsal_targets` group) a fresh target comes from",
        },
    ),
    Layer(
        "application",
        {
            "drtool.config": "the config file, the environment and the credentials a command runs with",
            "drtool.runbook": "a Markdown runbook for a plan",
            "drtool.cli": "the `drtool` command: parses and prints, the library does the work",
            "drtool.__main__": "`python -m drtool`",
        },
    ),
    Layer(
        "the lab, outside the product",
        {
            "drtool_lab": "real servers for the demo, rehearsals and tests, built from pinned upstream modules; "
            "each plugin's lab support (`lab/plugins/`, the `drtool.lab` group); the fresh-lab rehearsal target "
            "(`lab/targets.py`, the `drtool.rehearsal_targets` group); the demo and the `lab` and `demo` commands "
            "(the `drtool.commands` group). Not in the container image",
        },
    ),
)


def member_of(module: str) -> str | None:
    """The table's entry a module belongs to: the longest member that is the module or a package holding it."""
    found = [
        m for layer in LAYERS for m in layer.members if module == m or (module.startswith(f"{m}.") and m not in FACES)
    ]
    return max(found, key=len, default=None)


def layer_of(module: str) -> int | None:
    """The index of a module's layer in ``LAYERS`` (0 is the bottom), or None if the table does not place it."""
    member = member_of(module)
    return next((i for i, layer in enumerate(LAYERS) if member in layer.members), None)


def path_of(member: str, root: Path) -> str:
    """Where a member lives in the checkout: ``drtool/repo/``, ``drtool/errors.py``, ``plugins/``."""
    top, _, rest = member.partition(".")
    folder = Path(ROOTS[top], *rest.split(".")) if rest else Path(ROOTS[top])
    if member in FACES:
        return f"{folder}/__init__.py"
    return f"{folder}/" if (root / folder).is_dir() else f"{folder}.py"


def render(root: Path) -> str:
    """The table for docs/architecture.md, top layer first (as the page reads)."""
    lines = [BEGIN, "", "| layer | package or module | job |", "|---|---|---|"]
    for layer in reversed(LAYERS):
        for member, job in layer.members.items():
            lines.append(f"| {layer.name} | `{path_of(member, root)}` | {job} |")
    return "\n".join([*lines, "", END])


def write(doc: Path, root: Path) -> None:
    """Replace the table between the markers in ``doc``."""
    text = doc.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    doc.write_text(text[:start] + render(root) + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description="Print drtool's table of layers, or write it into a page.")
    parser.add_argument("--write", type=Path, help="the page whose table to replace (docs/architecture.md)")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    if args.write:
        write(args.write, root)
    else:
        print(render(root))


if __name__ == "__main__":
    main()
