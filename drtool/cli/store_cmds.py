"""Commands on a store: init, backup, list, show, check, restore."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from drtool.cli.state import console, human_bytes, print_json, progress, state, warn
from drtool.errors import IntegrityError, PartialBackup, SourceError, UsageError
from drtool.repo.layout import DEFAULT_LOCK_WAIT

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
BackupArg = Annotated[str, typer.Argument(help="Backup id, unique prefix or 'latest'.")]
TargetOpt = Annotated[list[str] | None, typer.Option("--target", "-t", help="Target setting KEY=VALUE (repeatable).")]


def parse_pairs(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """KEY=VALUE options (targets, restore options) into a mapping; values are YAML scalars, so
    ``start=true`` is a boolean and ``port=2379`` a number, as they would be in a restore plan."""
    import yaml

    from drtool import yamlio

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {pair!r} is not KEY=VALUE", f"for example --{what} data_dir=/var/lib/etcd-new")
        try:
            parsed = yamlio.loads(value) if value else ""
        except yaml.YAMLError:
            parsed = value
        out[key.strip()] = parsed if isinstance(parsed, str | int | float | bool) else value
    return out


def init(
    ctx: typer.Context,
    store: Annotated[str, typer.Option("--store", help="Store URL: a path, file:///path or s3://bucket/prefix.")],
    keyfile: Annotated[Path | None, typer.Option(help="Also create a key file slot, written to this path.")] = None,
    no_passphrase: Annotated[bool, typer.Option(help="Only a key file slot, no passphrase.")] = False,
    save: Annotated[bool, typer.Option(help="Remember the store in the config file.")] = True,
) -> None:
    """Create a new encrypted store. Example: DRTOOL_PASSPHRASE_FILE=pw drtool init --store s3://dr/backups"""
    from drtool.backends import open_backend
    from drtool.config import passphrase_from_env
    from drtool.crypto.slots import keyfile_text, new_keyfile_text
    from drtool.files import create_private, refuse_existing
    from drtool.repo.repository import Repository

    backend = open_backend(store)
    keyfile_secret = None
    if keyfile:
        refuse_existing(keyfile)
        _, keyfile_secret = new_keyfile_text()
    passphrase = None if no_passphrase else passphrase_from_env("New store passphrase: ", confirm=True)
    if not no_passphrase and not passphrase:
        raise UsageError(
            "no passphrase given", "set DRTOOL_PASSPHRASE or DRTOOL_PASSPHRASE_FILE, or use --keyfile --no-passphrase"
        )
    repo = Repository.init(backend, passphrase=passphrase, keyfile_secret=keyfile_secret)
    if keyfile and keyfile_secret:
        create_private(keyfile, keyfile_text(keyfile_secret, repo.key))
    if save:
        state(ctx).settings.save_store(store)
    console.print(f"created store [bold]{store}[/] (id {repo.config.store_id})")
    console.print(
        "keep the passphrase or key file safe: without it the backups cannot be read; "
        "`drtool key recovery-shares` prints offline recovery shares"
    )


def backup(
    ctx: typer.Context,
    plugin: Annotated[
        list[str] | None, typer.Option("--plugin", "-p", help="Plugin to run (repeatable); default all configured.")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Tag the backup (repeatable).")] = None,
    backup_set: Annotated[str | None, typer.Option("--set", help="Name of the backup set.")] = None,
    lock_wait: Annotated[
        float, typer.Option(help="Seconds to wait for a running prune (it holds the store exclusively).")
    ] = DEFAULT_LOCK_WAIT,
    force_read: Annotated[
        bool, typer.Option("--force-read", help="Read all of every source, also what is unchanged since last time.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Back up the configured sources. Example: drtool backup --plugin etcd"""
    from drtool.backup import run_backup
    from drtool.plugin.manager import get_plugin, load_one, load_plugins

    app = state(ctx)
    sources = app.settings.sources
    if plugin:  # only the named plugins are imported
        plugins = [load_one(n) for n in plugin]
    else:
        names = sorted(n for n in load_plugins() if n in sources) or sorted(load_plugins())
        plugins = [get_plugin(n) for n in names]
    repo = app.open_repo()
    with progress() as prog:
        manifest = run_backup(
            repo,
            plugins,
            sources,
            catalog=app.open_recorder(),
            backup_set=backup_set,
            tags=tag or [],
            progress=prog,
            lock_wait=lock_wait,
            force_read=force_read,
        )
    if as_json:
        print_json(manifest.model_dump(exclude={"artifacts"}) | {"size": manifest.size})
    else:
        stats = manifest.stats
        console.print(
            f"backup [bold]{manifest.id}[/] {manifest.status}: {len(manifest.artifacts)} artifact(s), "
            f"{human_bytes(manifest.size)}: {human_bytes(stats.get('bytes_read', 0))} read, "
            f"{human_bytes(stats.get('bytes_reused', 0))} unchanged and not read, "
            f"{human_bytes(stats.get('bytes_stored', 0))} stored "
            f"({stats.get('chunks_new', 0)} new of {stats.get('chunks', 0)} chunks)"
        )
        for name, outcome in sorted(manifest.plugins.items()):
            if isinstance(outcome.meta.get("summary"), str):  # what the plugin read and skipped, in its words
                console.print(f"  {name}: {outcome.meta['summary']}", highlight=False, markup=False)
    if manifest.status == "partial":
        failed = "; ".join(f"{n}: {o.error}" for n, o in manifest.plugins.items() if o.status == "failed")
        raise PartialBackup(f"backup {manifest.id} is partial: {failed}", "fix the failing source and back up again")


def list_backups(
    ctx: typer.Context,
    deltas: Annotated[bool, typer.Option("--deltas", help="Also list every delta of delta chains.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the store's backups (the catalog is synced from the store first); a chain's deltas are counted
    on the full before them unless --deltas."""
    from drtool.catalog.listing import backup_listing, chain_text, flag_entries  # SQLModel: only `list` pays

    app = state(ctx)
    repo = app.open_repo()
    catalog = app.open_catalog()
    catalog.sync(repo)
    store_id = repo.config.store_id
    entries = backup_listing(catalog.backups(store_id), catalog.chain_links(store_id), with_deltas=deltas)
    flag_entries(entries, repo.stored_times(), repo.max_skew)
    if as_json:
        print_json(entries)
        return
    table = Table("id", "finished", "status", "plugins", "size", "stored", "chain")
    for e in entries:
        status = e["status"] if not e["failed_plugins"] else f"{e['status']} ({e['failed_plugins']} failed)"
        status = f"[red]FLAGGED[/] {status}" if e["flag"] else status
        stored = e["bytes_stored"] + ((e["chain"] or {}).get("deltas") or {}).get("bytes_stored", 0)
        table.add_row(
            e["id"],
            e["finished"][:19],
            status,
            e["plugins"],
            human_bytes(e["size"]),
            human_bytes(stored),
            chain_text(e),
        )
    console.print(table)
    for e in entries:
        if e["flag"]:
            console.print(f"[red]{e['id']} is flagged: {e['flag']}[/] (chosen by nothing; docs/threat-model.md)")


def show(
    ctx: typer.Context,
    backup_id: BackupArg,
    as_json: JsonOpt = False,
) -> None:
    """Show one backup: plugins, artifacts, failure domain."""
    repo = state(ctx).open_repo()
    manifest = repo.find_backup(backup_id)
    if as_json:
        data = manifest.model_dump()
        for a in data["artifacts"]:
            a["chunks"] = len(a["chunks"])
        print_json(data | {"stored": manifest.stored, "flag": manifest.flag, "key_generation": manifest.generation})
        return
    console.print(
        f"[bold]{manifest.id}[/] {manifest.status}  started {manifest.started}  finished {manifest.finished}"
        f"  host {manifest.hostname}"
    )
    if manifest.flag:
        console.print(f"[red]flagged: {manifest.flag}[/] (never chosen as latest; docs/threat-model.md)")
    for name, outcome in manifest.plugins.items():
        console.print(f"  plugin {name}: {outcome.status}" + (f" — {outcome.error}" if outcome.error else ""))
    table = Table("plugin", "artifact", "size", "chunks", "sha256", "sensitive")
    for a in manifest.artifacts:
        table.add_row(
            a.plugin, a.name, human_bytes(a.size), str(len(a.chunks)), a.sha256[:16], "yes" if a.sensitive else ""
        )
    console.print(table)


def check(
    ctx: typer.Context,
    read_data: Annotated[bool, typer.Option(help="Download and verify every chunk.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Verify that every backup is restorable: chunks present (and with --read-data, intact)."""
    from drtool.repo.check import check as check_store

    repo = state(ctx).open_repo()
    with progress() as prog:
        report = check_store(repo, read_data=read_data, progress=prog)
    if as_json:
        print_json(report.to_json())
    else:
        console.print(
            f"{report.backups} backup(s), {report.chunks_referenced} chunk(s) referenced, "
            f"{report.chunks_present} present, {report.chunks_read} read and verified"
        )
        for backup_id, err in report.bad_manifests.items():
            console.print(f"[red]manifest {backup_id}: {err}[/]")
        for name, why in report.ignored.items():
            console.print(f"[red]{name} ignored: {why}[/]")
        for line in report.store_warnings:
            console.print(f"[red]{line}[/]")
        for pack_id, backups in report.missing_packs.items():
            console.print(f"[red]missing pack {pack_id[:16]} (needed by {', '.join(backups)})[/]")
        for pack_id, err in report.damaged_packs.items():
            console.print(f"[red]damaged pack {pack_id[:16]}: {err}[/]")
        for backup_id, why in report.flagged.items():
            console.print(f"[red]backup {backup_id} is flagged: {why}[/]")
        for backup_id, why in report.compacted.items():
            console.print(f"backup {backup_id}: {why}")
        for chunk_id, backups in report.missing_chunks.items():
            console.print(f"[red]missing chunk {chunk_id[:16]} (needed by {', '.join(backups)})[/]")
        for chunk_id, err in report.damaged_chunks.items():
            console.print(f"[red]damaged chunk {chunk_id[:16]}: {err}[/]")
        if report.orphan_chunks:
            console.print(
                f"{len(report.orphan_chunks)} orphan chunk(s) no backup references "
                "(left by an interrupted backup; `drtool prune` removes them)"
            )
        if report.orphan_packs:
            console.print(
                f"{len(report.orphan_packs)} orphan pack(s) no index names "
                "(left by an interrupted backup; the next backup reuses them, `drtool prune` removes them)"
            )
        if report.leftover_temp_files:
            console.print(f"{len(report.leftover_temp_files)} leftover temp file(s) from interrupted writes")
        console.print("[green]no errors[/]" if report.ok else "[red]errors found[/]")
    if not report.ok:
        raise IntegrityError("the store check found errors", "restore older backups; the lines above list the damage")


def restore(
    ctx: typer.Context,
    backup_id: Annotated[
        str | None, typer.Argument(help="Backup id, unique prefix or 'latest' (with --plan: overrides its source).")
    ] = None,
    plugin: Annotated[str | None, typer.Option("--plugin", "-p", help="Which plugin's artifacts to restore.")] = None,
    target: TargetOpt = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="Restore option KEY=VALUE (repeatable).")
    ] = None,
    no_verify: Annotated[bool, typer.Option(help="Skip the plugin's post-restore verification.")] = False,
    verify: Annotated[
        str | None,
        typer.Option("--verify", help="full: read everything back (plugins that sample, e.g. checkpoints)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Report what would change; write nothing (plugins that can).")] = False,
    namespace_map: Annotated[
        list[str] | None, typer.Option("--namespace-map", help="Restore namespace A as B: A=B (repeatable).")
    ] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="Restore with a plan (docs/plans.md).")] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Resume a failed plan run from its failed steps.")
    ] = None,
    values: Annotated[Path | None, typer.Option("--values", help="Variables for the plan (YAML).")] = None,
    approve: Annotated[
        list[str] | None, typer.Option("--approve", help="With --plan/--resume: approve this gated step (repeatable).")
    ] = None,
    approve_all: Annotated[
        bool, typer.Option("--approve-all", help="With --plan/--resume: approve every gated step.")
    ] = False,
    approver: Annotated[
        str | None, typer.Option("--approver", help="The name approvals are recorded under (default: the OS user).")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Point in time of a delta chain: a revision, a time (UTC) or 'latest'."),
    ] = None,
    trust_compacted: Annotated[
        bool,
        typer.Option(help="With --at: also start from folded fulls the store received after the point."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Restore a backup into a target. Example: drtool restore latest -p etcd -t data_dir=/var/lib/etcd-2

    Point in time (chains written by `drtool follow`): drtool restore latest -p etcd --at 2026-12-01T14:05:00Z

    With a plan: drtool restore --plan restore-plans/full-cluster-rebuild.yaml [--dry-run] [--approve STEP]"""
    from drtool.plugin import settings
    from drtool.plugin.contract import VERDICT_TEXT
    from drtool.plugin.manager import load_one
    from drtool.repo.chains import PointPlan, find_point
    from drtool.repo.manifest import Manifest
    from drtool.restore import run_restore

    if plan or resume:
        from drtool.cli.plan_cmds import Gates, restore_with_plan

        gates = Gates(approve or [], approve_all, approver)
        return restore_with_plan(ctx, plan, resume, backup_id, values, dry_run, as_json, gates)
    if approve or approve_all or approver:
        raise UsageError("--approve, --approve-all and --approver go with --plan or --resume", "see docs/plans.md")
    if not backup_id or not plugin:
        raise UsageError("restore needs a backup and --plugin, or --plan FILE", "see `drtool restore --help`")
    if trust_compacted and at is None:
        raise UsageError("--trust-compacted goes with --at", "it says which folded fulls a point may start from")
    if verify not in (None, "sample", "full") or (verify and no_verify):
        raise UsageError(f"--verify={verify}", "--verify=sample or --verify=full, without --no-verify")
    chosen = load_one(plugin)  # not every installed plugin's imports
    settings.check(chosen, "target", parse_pairs(target, "target"), "-t")
    settings.check(chosen, "option", parse_pairs(option, "option"), "-o")
    repo = state(ctx).open_repo()
    with progress() as prog:
        options = parse_pairs(option, "option")
        if dry_run:
            options["dry_run"] = True
        if verify is not None:
            options["verify"] = verify
        if namespace_map:
            parse_pairs(namespace_map, "namespace-map")  # each must be A=B
            options["namespace_map"] = ",".join(namespace_map)
        if at is None:
            backup: Manifest | PointPlan = repo.find_backup(backup_id)
        else:
            backup = find_point(repo, plugin, backup_id, at, trust_compacted=trust_compacted)
        if isinstance(backup, Manifest) and backup.flag:  # named by its id: the operator's choice, said aloud
            warn(f"backup {backup.id} is flagged: {backup.flag}")
        outcome = run_restore(
            repo,
            backup,
            chosen,
            parse_pairs(target, "target"),
            options=options,
            verify=not no_verify,
            progress=prog,
        )
    if as_json:
        print_json(
            {
                "backup": outcome.backup_id,
                "plugin": outcome.plugin,
                "changed": outcome.result.changed,
                "summary": outcome.result.summary,
                "details": dict(outcome.result.details),
                "checks": [c.__dict__ for c in outcome.checks],
                "verified": outcome.verified,
                "verification": outcome.verification,
            }
        )
    else:
        console.print(f"restored {outcome.plugin} from {outcome.backup_id}: {outcome.result.summary}")
        for c in outcome.checks:
            mark = "[green]ok[/]" if c.ok else "[red]FAILED[/]"
            console.print(f"  {mark} {c.name}" + (f" — {c.detail}" if c.detail else ""))
        if not outcome.verified and not outcome.failed:
            console.print(f"  [yellow]{VERDICT_TEXT[outcome.verification]}[/]")
    if outcome.failed:
        failed = ", ".join(c.name for c in outcome.checks if not c.ok)
        raise SourceError(
            f"restored {outcome.plugin}, but verification failed: {failed}", "the checks are listed above"
        )


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(backup)
    app.command("list")(list_backups)
    app.command()(show)
    app.command()(check)
    app.command()(restore)
