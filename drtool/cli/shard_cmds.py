"""`drtool shard backup|restore`: one worker of a sharded backup or restore, as a Kubernetes Indexed Job runs
it (manifests/sharded/job-backup-checkpoints.yaml; docs/scaling.md). Every worker runs the same command; the Job gives
each its JOB_COMPLETION_INDEX."""

from __future__ import annotations

from typing import Annotated

import typer

from drtool.cli.state import console, print_json, progress, state
from drtool.cli.store_cmds import BackupArg, JsonOpt, TargetOpt, parse_pairs
from drtool.errors import SourceError, UsageError

app = typer.Typer(help="One worker of a sharded backup or restore (a Kubernetes Indexed Job's pod; docs/scaling.md).")

JobOpt = Annotated[str, typer.Option("--job", envvar="DRTOOL_JOB", help="The job's id (the Job's uid): one backup.")]
CountOpt = Annotated[int, typer.Option("--count", envvar="DRTOOL_SHARDS", help="How many workers the job has.")]
IndexOpt = Annotated[
    int | None, typer.Option("--index", envvar="JOB_COMPLETION_INDEX", help="This worker (0..count-1).")
]


def _index(index: int | None) -> int:
    if index is None:
        raise UsageError("no shard index", "pass --index or run as an Indexed Job (JOB_COMPLETION_INDEX)")
    return index


@app.command("backup")
def shard_backup(
    ctx: typer.Context,
    job: JobOpt,
    count: CountOpt,
    index: IndexOpt = None,
    plugin: Annotated[list[str] | None, typer.Option("--plugin", "-p", help="Plugin to run (repeatable).")] = None,
    backup_set: Annotated[str | None, typer.Option("--set", help="Name of the backup set.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Tag the backup (repeatable).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Back up this worker's share; the worker that completes the set publishes the one backup.

    Example (worker 1 of 4): drtool shard backup --job $JOB_UID --count 4 --index 1 -p checkpoints"""
    from drtool.plugin.manager import get_plugin, load_plugins
    from drtool.shards import check_job, run_shard_backup

    app_state = state(ctx)
    sources = app_state.settings.sources
    names = plugin or sorted(n for n in load_plugins() if n in sources)
    shard = _index(index)
    check_job(job, shard, count)
    repo = app_state.open_repo()
    with progress() as prog:
        outcome = run_shard_backup(
            repo,
            [get_plugin(n) for n in names],
            sources,
            job=job,
            index=shard,
            count=count,
            backup_set=backup_set,
            tags=tag or [],
            progress=prog,
            catalog=app_state.open_catalog(),
        )
    manifest = outcome.manifest
    facts = {"job": job, "index": shard, "count": count, "published": manifest is not None}
    if manifest is not None:
        facts |= {"id": manifest.id, "status": manifest.status, "stats": manifest.stats}
    if outcome.commit_seconds is not None:
        facts["commit_seconds"] = round(outcome.commit_seconds, 4)
    if as_json:
        print_json(facts)
    elif manifest is None:
        console.print(f"shard {shard} of {count} of job {job} written; the last worker to finish publishes")
    else:
        console.print(f"backup [bold]{manifest.id}[/] {manifest.status}: published from {count} shard(s)")


@app.command("restore")
def shard_restore(
    ctx: typer.Context,
    backup_id: BackupArg,
    job: JobOpt,
    count: CountOpt,
    plugin: Annotated[str, typer.Option("--plugin", "-p", help="Which plugin's artifacts to restore.")],
    index: IndexOpt = None,
    target: TargetOpt = None,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Restore option KEY=VALUE.")] = None,
    no_verify: Annotated[bool, typer.Option(help="Skip verification (run by the worker that completes).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Restore this worker's share; the worker that completes the set writes the commit files and verifies.

    Example: drtool shard restore latest --job $JOB_UID --count 4 -p checkpoints -t url=s3://ckpt-restored"""
    from drtool.plugin.contract import verification
    from drtool.plugin.manager import get_plugin
    from drtool.repo.restore_context import PluginRestoreContext
    from drtool.restore import run_restore
    from drtool.shards import check_job

    shard = _index(index)
    check_job(job, shard, count)
    chosen = get_plugin(plugin)
    if not getattr(chosen, "shardable", False):
        raise UsageError(f"plugin {plugin} cannot be restored in shards", "restore it with `drtool restore`")
    repo = state(ctx).open_repo()
    options = parse_pairs(option, "option") | {"shard_index": shard, "shard_count": count, "job": job}
    targets = parse_pairs(target, "target")
    with progress() as prog:
        outcome = run_restore(
            repo, repo.find_backup(backup_id), chosen, targets, options=options, verify=False, progress=prog
        )
    committed = bool(outcome.result.details.get("committed"))
    verify = committed and not no_verify
    ctx_for_verify = PluginRestoreContext(repo, repo.get_manifest(outcome.backup_id), plugin) if verify else None
    checks = chosen.verify(ctx_for_verify, targets, options) if ctx_for_verify is not None else []
    if not all(c.ok for c in checks):
        failed = ", ".join(c.name for c in checks if not c.ok)
        raise SourceError(f"restored {plugin}, but verification failed: {failed}", "the checks are listed above")
    facts = {"index": shard, "count": count, "committed": committed, "summary": outcome.result.summary}
    if as_json:
        print_json(facts | {"checks": [c.__dict__ for c in checks], "verification": verification(checks, verify)})
    else:
        console.print(f"shard {shard} of {count}: {outcome.result.summary}" + (" (committed)" if committed else ""))
