"""The restore plan schema (docs/plans.md): a YAML DAG of plugin steps with objectives, checks and waivers.

The model is strict (unknown fields are errors) because a typo in a DR plan found during a disaster is a
typo found too late. Secrets are never inline: a field whose name says it holds a secret must be a
reference (``*_env`` naming an environment variable, or ``*_file`` naming a file), never a literal value.
A plan is data, not code (docs/threat-model.md): it names no program to run (binaries come from drtool's
own discovery, ``drtool.binaries``), it declares every variable it reads (``variables:``; never a
secret-bearing name), and its ``*_env`` references never name drtool's own or the store's credentials.
"""

from __future__ import annotations

import datetime as dt
import re
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from drtool.durations import Duration
from drtool.environ import is_secret_name
from drtool.errors import UsageError
from drtool.kube.transforms import Transforms as TransformEngine

_STEP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# A key named like this holds a secret; only references to one (``password_env``, ``token_file``) are allowed.
_SECRET_KEY = re.compile(r"(password|passphrase|secret|token|private[_-]?key|unseal|access[_-]?key|credential)", re.I)
_SECRET_REFERENCE_SUFFIXES = ("_env", "_file", "_ref", "-env", "-file", "-ref")
_ENV_REFERENCE_SUFFIXES = ("_env", "-env")
# what drtool itself unlocks the store with: never handed to a target by a plan's ``*_env`` reference
_OWN_CREDENTIALS = ("DRTOOL_", "AWS_")
# an option that would name a program for drtool to run (the etcd plugin's old ``etcdutl``, and the like)
_PROGRAM_KEY = re.compile(
    r"^(etcdutl|etcdctl|etcd_bin|bao|git|helm|kubectl|skopeo|command|cmd|exec|program|binary|executable"
    r"|.*[_-](bin|binary|command|cmd|exe|executable|program))$",
    re.I,
)
_PLAN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # it names report files: one plain file name
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def inline_secrets(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every inline secret in a nested mapping (a secret-named key holding a literal)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            is_reference = str(key).endswith(_SECRET_REFERENCE_SUFFIXES)
            if _SECRET_KEY.search(str(key)) and not is_reference and isinstance(item, str | int) and item != "":
                found.append(where)
            else:
                found.extend(inline_secrets(item, where))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(inline_secrets(item, f"{path}[{i}]"))
    return found


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _walk(value: Any, path: str = "") -> list[tuple[str, str, Any]]:
    """(dotted path, key, value) of every mapping entry in a nested mapping, depth first."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            found += [(where, str(key), item), *_walk(item, where)]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _walk(item, f"{path}[{i}]")
    return found


def _options_checked(value: dict[str, Any]) -> dict[str, Any]:
    """A plugin's options or target from a plan: no inline secret, no program, no drtool credential."""
    paths = inline_secrets(value)
    if paths:
        raise ValueError(
            f"inline secret at {', '.join(paths)}: name an environment variable (`<field>_env`) or a file "
            "(`<field>_file`) instead"
        )
    entries = _walk(value)
    programs = [where for where, key, _ in entries if _PROGRAM_KEY.match(key)]
    if programs:
        raise ValueError(
            f"{', '.join(programs)} would name a program to run: plans run none (drtool finds etcdutl, bao and "
            "git itself; DRTOOL_ETCDUTL and the like set them in drtool's environment)"
        )
    own = [
        f"{where} ({item})"
        for where, key, item in entries
        if key.endswith(_ENV_REFERENCE_SUFFIXES) and isinstance(item, str) and item.upper().startswith(_OWN_CREDENTIALS)
    ]
    if own:
        raise ValueError(
            f"{', '.join(own)} would hand drtool's own or the store's credentials to a target: name a variable "
            "that holds the target's own secret"
        )
    return value


def _per_plugin(value: dict[str, Any]) -> dict[str, Any]:
    """The plan's ``target`` block: each plugin's mapping checked like a step's (plugin names are keys here)."""
    for plugin, mapping in value.items():
        if isinstance(mapping, Mapping):
            try:
                _options_checked(dict(mapping))
            except ValueError as exc:
                raise ValueError(f"{plugin}: {exc}") from None
    return value


FreeMapping = Annotated[dict[str, Any], BeforeValidator(lambda v: v if v is not None else {})]


class LatestBefore(_Strict):
    latest_before: dt.datetime = Field(alias="latest-before")


class Source(_Strict):
    """Which backup to restore: ``latest`` (default), a backup id, or the latest before a time."""

    store: str | None = None  # default: the configured store
    backup: str | LatestBefore = "latest"
    backup_set: str | None = Field(default=None, alias="backup-set")


class Objectives(_Strict):
    # which workload the objectives are for: the guide sets training's and inference's apart (docs/audit.md)
    workload: Literal["training", "inference"] | None = None
    rto: Duration | None = None
    rpo: Duration | None = None


def _shaped(pattern: re.Pattern[str], rule: str) -> AfterValidator:
    """A string field that must match ``pattern``; ``rule`` (a format string for the value) says why not."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(rule.format(value))
        return value

    return AfterValidator(check)


class Step(_Strict):
    id: Annotated[str, _shaped(_STEP_ID, "step id {!r} must be lowercase letters, digits, '-' or '_'")]
    uses: str  # a plugin name
    needs: list[str] = Field(default_factory=list)
    with_: FreeMapping = Field(default_factory=dict, alias="with")  # the plugin's restore options
    target: FreeMapping = Field(default_factory=dict)  # merged over the plan's target for this plugin
    timeout: Duration | None = None
    retries: int = Field(default=0, ge=0, le=10)
    approval: bool = False  # a human must approve this step in a real disaster (shown in the runbook)
    optional: bool = False  # skipped ("plugin not in backup") when its plugin is not installed or not backed up
    description: str = ""

    _checked_with = field_validator("with_", "target")(classmethod(lambda cls, v: _options_checked(v)))


class KubeObjectCheck(_Strict):
    """The object exists on the target (and, with ``jsonpath``-like ``field``, has a value)."""

    type: Literal["kube-object"]
    id: str
    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str
    namespace: str | None = None
    field: str | None = None  # dotted path, e.g. spec.resourceGroups
    equals: Any = None

    def summary(self) -> str:
        what = f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name} exists"
        if self.field is None:
            return what
        return f"{what}, {self.field} " + (f"= {self.equals!r}" if self.equals is not None else "set")


class HttpCheck(_Strict):
    type: Literal["http"]
    id: str
    url: str
    status: int = 200

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        """The URL is printed in every report and sent wherever it points: it carries no credential."""
        parts = urlsplit(value)
        secret_params = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if is_secret_name(k)]
        if parts.username or parts.password or secret_params:
            what = f"query parameter(s) {', '.join(secret_params)}" if secret_params else "a user or password"
            raise ValueError(f"the check's URL carries {what}: checks are unauthenticated reads of a health endpoint")
        return value

    def summary(self) -> str:
        return f"GET {self.url} answers {self.status}"


class TcpCheck(_Strict):
    type: Literal["tcp"]
    id: str
    address: str  # host:port

    def summary(self) -> str:
        return f"{self.address} accepts connections"


class ContributedCheck(BaseModel):
    """A check of a type a plugin contributes (drtool.plugin.checks; the platform checks, docs/plans.md, come
    from the built-in plugins so): its keys are checked by `plan validate` against the contribution's model,
    since the schema cannot know what the installed plugins add."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str
    id: str

    def summary(self) -> str:
        return f"{self.type} check (from a plugin)"

    def settings(self) -> dict[str, Any]:
        """The entry as written, for the contribution's own model."""
        return self.model_dump()

    @property
    def step(self) -> str | None:
        """The plan step the check is about (its ``step`` key, drtool.plugin.checks), or None."""
        step = (self.model_extra or {}).get("step")
        return step if isinstance(step, str) else None


_BUILT_IN_CHECKS = (KubeObjectCheck, HttpCheck, TcpCheck)
BUILT_IN_CHECK_TYPES = tuple(typing.get_args(c.model_fields["type"].annotation)[0] for c in _BUILT_IN_CHECKS)
CONTRIBUTED = "contributed"  # the union's tag of a check type no built-in model has


def _check_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if kind in BUILT_IN_CHECK_TYPES else CONTRIBUTED


PlanCheck = Annotated[
    Annotated[KubeObjectCheck, Tag("kube-object")]
    | Annotated[HttpCheck, Tag("http")]
    | Annotated[TcpCheck, Tag("tcp")]
    | Annotated[ContributedCheck, Tag(CONTRIBUTED)],
    Discriminator(_check_tag),
]


StrMap = Annotated[dict[str, str], BeforeValidator(lambda v: v if v is not None else {})]


class Transforms(_Strict):
    """How the backup's objects are rewritten for the target cluster (drtool.kube.transforms, docs/restore-into-
    another-cluster.md): each a map from the source's value to the target's, applied by every step whose
    plugin takes transforms (kubernetes, kueue). A rule that matches nothing in the backup is an error."""

    storage_classes: StrMap = Field(default_factory=dict, alias="storage-classes")
    image_registries: StrMap = Field(default_factory=dict, alias="image-registries")
    namespaces: StrMap = Field(default_factory=dict)
    node_labels: StrMap = Field(default_factory=dict, alias="node-labels")  # "key=value": "key=value"

    @model_validator(mode="after")
    def _engine_accepts(self) -> Transforms:
        try:
            self.engine()
        except UsageError as exc:
            raise ValueError(exc.message) from None
        return self

    def options(self) -> dict[str, dict[str, str]]:
        """The block as a plugin's ``transforms`` option (the plan's own keys, empty maps left out)."""
        return {k: v for k, v in self.model_dump(by_alias=True).items() if v}

    def engine(self) -> TransformEngine:
        return TransformEngine.parse(self.options())


class Waiver(_Strict):
    """Accept one dependency inside the failure domain on purpose; shown as waived in reports, never as passed."""

    match: str  # glob over the dependency's address (e.g. ``*.svc.cluster.local``, ``10.96.0.10:53``)
    reason: str = Field(min_length=3)
    step: str | None = None  # only for this step's dependencies
    expires: dt.date | None = None


class Notify(_Strict):
    """Where a run tells people what happens (drtool.plans.notify): a URL that takes a JSON POST."""

    webhook: str | None = None  # used only when DRTOOL_WEBHOOK_ALLOW lists it (drtool.plans.notify)


class Variable(_Strict):
    """A variable the plan reads: ``${NAME}`` anywhere in a value; from ``--values``, then the environment's
    ``DRTOOL_VAR_NAME`` (never ``NAME`` itself), then ``${NAME:-default}``, then ``default`` here."""

    description: str = ""
    default: str | int | float | bool | None = None


def _variables(value: Any) -> Any:
    """``NAME: description`` is short for ``NAME: {description: ...}``; every name plain and not secret-bearing."""
    if not isinstance(value, Mapping):
        return value
    for name in value:
        if not VARIABLE_NAME.match(str(name)):
            raise ValueError(f"variable name {name!r} must be letters, digits and '_'")
        if is_secret_name(str(name)):
            raise ValueError(
                f"variable {name} has a secret-bearing name: plans never read secrets into values (name the "
                "variable in a `<field>_env` reference instead, docs/plans.md)"
            )
    return {k: {"description": v} if isinstance(v, str) else (v or {}) for k, v in value.items()}


class Plan(_Strict):
    api_version: Literal["drtool/v1"] = Field(default="drtool/v1", alias="apiVersion")
    kind: Literal["RestorePlan"] = "RestorePlan"
    name: Annotated[
        str, _shaped(_PLAN_NAME, "plan name {!r} must be letters, digits, '.', '-' or '_' (it names report files)")
    ]
    description: str = ""
    variables: Annotated[dict[str, Variable], BeforeValidator(_variables)] = Field(default_factory=dict)
    source: Source = Field(default_factory=Source)
    target: FreeMapping = Field(default_factory=dict)  # plugin name -> target mapping (kubeconfig, etcd, ...)
    objectives: Objectives = Field(default_factory=Objectives)
    transforms: Transforms = Field(default_factory=Transforms)
    parallelism: int = Field(default=4, ge=1, le=64)
    steps: list[Step] = Field(min_length=1)
    checks: list[PlanCheck] = Field(default_factory=list)
    waivers: list[Waiver] = Field(default_factory=list)
    notify: Notify = Field(default_factory=Notify)

    _checked_target = field_validator("target")(classmethod(lambda cls, v: _per_plugin(v)))

    @model_validator(mode="after")
    def _unique_step_ids(self) -> Plan:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} appears twice")
            seen.add(step.id)
        return self

    @model_validator(mode="after")
    def _checks_name_their_steps(self) -> Plan:
        ids = {s.id for s in self.steps}
        for check in self.checks:
            if isinstance(check, ContributedCheck) and check.step is not None and check.step not in ids:
                raise ValueError(f"check {check.id!r} names step {check.step!r}, which the plan does not have")
        return self

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def options_for(self, step: Step, takes_transforms: bool) -> dict[str, Any]:
        """A step's restore options: its ``with``, and the plan's transforms when its plugin takes them."""
        transforms = self.transforms.options()
        return {**step.with_, "transforms": transforms} if transforms and takes_transforms else dict(step.with_)

    def target_for(self, step: Step) -> dict[str, Any]:
        """The target a step restores into: the plan's block for its plugin, with the step's own over it."""
        base = self.target.get(step.uses) or {}
        return {**base, **step.target}
