"""Typed plugin settings: the keys a plugin's source, restore target and restore options accept.

A plugin declares them as pydantic models (``Schema``), the way Home Assistant integrations declare their
config schema, so `drtool plan validate`, every backup (the config's sources), `drtool restore -t/-o` and
`drtool plugins --describe` can say "target key 'kubeconfg' is unknown; did you mean 'kubeconfig'?" before
anything runs, instead of the plugin silently ignoring a misspelled key at 3 a.m. Models are strict
(``extra='forbid'``) and lenient about form only: values given as ``-t KEY=VALUE`` on the command line are
strings, so a list also takes a comma-separated string and a flag "true"/"false" (as
drtool.plugin.toolkit.settings does).

A plan value that is a ``${VARIABLE}`` not set at validation time is judged only by its key: the plugin
reads its value when the plan runs with the variable set.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

from drtool.errors import UsageError
from drtool.plugin.toolkit.settings import as_list

Kind = Literal["source", "target", "option", "check"]
Settings = TypeVar("Settings", bound=BaseModel)


class PluginSettings(BaseModel):
    """Base of every plugin settings model: unknown keys are errors, and fields are the keys as written."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_secret_file(path: str) -> str:
    """Every ``*_file`` setting that names a file holding a secret passes here: the one place a path policy
    (which files a plan may name) applies to all plugins at once."""
    if not path.strip():
        raise ValueError("names no file")
    return path


# a path to a file holding a secret (a token, a key, unseal keys); declare ``*_file`` secret fields with it
SecretFile = Annotated[str, AfterValidator(check_secret_file)]
# a list from a YAML list or a comma-separated string (``-t include_namespaces=a,b``)
StrList = Annotated[list[str], BeforeValidator(lambda v: as_list(v) if v is None or isinstance(v, str) else v)]
# a mapping ``{old: new}`` or its command-line form ``"old=new,old2=new2"`` (checked by the plugin)
StrMap = dict[str, str] | str


@dataclasses.dataclass(frozen=True)
class Schema:
    """What a plugin accepts, as its ``schema`` attribute; a part left None is not checked."""

    source: type[PluginSettings] | None = None
    target: type[PluginSettings] | None = None
    option: type[PluginSettings] | None = None

    def model(self, kind: Kind) -> type[PluginSettings] | None:
        return getattr(self, kind, None)


def schema_of(plugin: Any) -> Schema:
    """The plugin's declared settings (an empty Schema for a plugin that declares none)."""
    found = getattr(plugin, "schema", None)
    return found if isinstance(found, Schema) else Schema()


def _unresolved(value: Any) -> bool:
    """A plan's ``${VARIABLE}`` not set at validation time: its value is the plugin's to read once it is set."""
    return isinstance(value, str) and "${" in value


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type may hold (``Model``, ``list[Model]``, ``Model | str``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is Annotated:
        return _models_in(typing.get_args(annotation)[0])
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _keys_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The keys allowed in the mapping at ``loc`` inside ``model`` (for a did-you-mean)."""
    current = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        fields = [m.model_fields[part] for m in current if part in m.model_fields]
        current = [m for f in fields for m in _models_in(f.annotation)]
        if not current:
            return []
    return sorted({k for m in current for k in m.model_fields})


def _where(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


@dataclasses.dataclass(frozen=True)
class KeyProblem:
    """One key a model does not accept: where it is (``loc``, e.g. ``("sources", 0, "markrs")``) and why."""

    loc: tuple[str | int, ...]
    message: str

    @property
    def key(self) -> str:
        """The top-level key the problem is under (what a plan's line numbers are kept for)."""
        return str(self.loc[0]) if self.loc else ""


def _located(model: type[BaseModel], err: Any) -> tuple[str | int, ...]:
    """The error's location in the keys as written: pydantic also names the union member it tried
    (``sources[0].Spec.markrs``), which is dropped; an unknown key stays last."""
    raw = tuple(err["loc"])
    names = _field_names(model, raw)
    kept = tuple(p for p in raw[:-1] if isinstance(p, int) or p in names)
    last = (
        raw[-1:] if raw and (isinstance(raw[-1], int) or raw[-1] in names or err["type"] == "extra_forbidden") else ()
    )
    return kept + last


def _problem(model: type[BaseModel], kind: Kind, err: Any, loc: tuple[str | int, ...]) -> KeyProblem:
    if err["type"] == "extra_forbidden":
        known = _keys_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known) or 'none'}"
        return KeyProblem(loc, f"{kind} key {_where(loc)!r} is unknown; {hint}")
    message = err["msg"].removeprefix("Value error, ")
    return KeyProblem(loc, f"{kind} key {_where(loc)!r}: {message}" if loc else message)  # no loc: the whole entry


def _field_names(model: type[BaseModel], loc: tuple[Any, ...]) -> set[str]:
    """Every field name along ``loc``."""
    names: set[str] = set()
    current = [model]
    for part in loc:
        if isinstance(part, str):
            fields = [m.model_fields[part] for m in current if part in m.model_fields]
            if fields:
                names.add(part)
                current = [m for f in fields for m in _models_in(f.annotation)] or current
    return names


def problems(
    model: type[BaseModel], value: Mapping[str, Any], kind: Kind, *, partial: bool = False
) -> list[KeyProblem]:
    """Each key of ``value`` that ``model`` does not accept (unknown, or a value of the wrong type).

    ``partial``: ``value`` is one layer of what the plugin gets (a plan's target, which a rehearsal or the
    command line completes), so a required key it lacks is no problem here."""
    try:
        model.model_validate(dict(value))
    except ValidationError as exc:
        errors = [
            (e, _located(model, e))
            for e in exc.errors()
            if not _unresolved(e.get("input")) and not (partial and e["type"] == "missing")
        ]
        # a value that fits one member of a union but for an unknown key: that key is the problem, not that the
        # value is no string (``sources: [URL | {url, ...}]``)
        unknown = [loc for e, loc in errors if e["type"] == "extra_forbidden"]
        found = [(e, loc) for e, loc in errors if e["type"] == "extra_forbidden" or not _above(loc, unknown)]
        return [_problem(model, kind, e, loc) for e, loc in found]
    return []


def _above(loc: tuple[str | int, ...], others: list[tuple[str | int, ...]]) -> bool:
    return any(len(other) > len(loc) and other[: len(loc)] == loc for other in others)


def check(plugin: Any, kind: Kind, value: Mapping[str, Any], where: str) -> None:
    """Raise a one-line UsageError (``where: target key ...``) when ``plugin``'s schema rejects a key of
    ``value``. ``value`` may be partial (what a plugin lacks, it says itself when it runs)."""
    model = schema_of(plugin).model(kind)
    found = problems(model, value, kind, partial=True) if model else []
    if found:
        raise UsageError(f"{where}: {found[0].message}", f"`drtool plugins --describe {plugin.name}` lists its keys")


def read(model: type[Settings], value: Mapping[str, Any], kind: Kind, where: str) -> Settings:
    """``value`` as ``model``, for a plugin that reads its settings typed; a one-line UsageError otherwise."""
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{where}: {_problem(model, kind, first, _located(model, first)).message}") from None


def check_sources(plugins: Iterable[Any], sources: Mapping[str, Mapping[str, Any]], where: str = "") -> None:
    """Refuse a backup, before it writes anything, when a source setting of one of ``plugins`` is one its
    schema does not accept (``sources`` as in the config: plugin name -> settings; ``where``: whose they are)."""
    for plugin in plugins:
        check(plugin, "source", sources.get(plugin.name) or {}, f"{where}sources.{plugin.name}")


def describe(model: type[BaseModel]) -> list[dict[str, str]]:
    """Key, type, default and meaning of every field, for `drtool plugins --describe`."""
    rows = []
    for name, field in model.model_fields.items():
        default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
        rows.append(
            {
                "key": name,
                "type": _type_name(field.annotation),
                "default": default,
                "description": field.description or "",
            }
        )
    return rows


def settings_table(plugin: Any) -> dict[str, Any]:
    """What `drtool plugins --describe NAME` shows: each declared part's keys (source, target, option)."""
    schema = schema_of(plugin)
    kinds: tuple[Kind, ...] = ("source", "target", "option")
    parts = {kind: describe(model) for kind in kinds if (model := schema.model(kind))}
    return {"name": plugin.name, "description": plugin.description, "settings": parts}


def _type_name(annotation: Any) -> str:
    """A field's type as a reader of `plugins --describe` wants it: ``list[str]``, ``'keep' | 'restore'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args if a is not type(None))
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))
