"""Reading a plan file: YAML with the line of every value kept, and ``${VAR}`` / ``${VAR:-default}`` filled in.

Lines matter because a plan is read in a hurry: "line 23: steps[2].needs names `etcd-restor`" is fixable at
3 a.m., a bare pydantic path is not. A plan reads only the variables it declares (``variables:``), never a
secret-bearing name: otherwise ``${DRTOOL_PASSPHRASE}`` in an ``http`` check's URL would send the store's
passphrase wherever the plan says, and into every report (docs/threat-model.md). Values come from a values
file (``--values``, a YAML mapping), then the environment **under the explicit prefix** ``DRTOOL_VAR_``
(``DRTOOL_VAR_TARGET_KUBECONFIG`` sets ``${TARGET_KUBECONFIG}``), then the inline default, then the
declared one. A plan never reads an environment variable by its own name: a plan that declared
``MYSQL_PWD`` or ``HTTPS_PROXY`` would otherwise choose which of the operator's variables end up in a
check's URL. A declared variable set nowhere stays as written (``${VAR}``) and is listed in ``unset``, so
`plan validate` and dry runs work without the target's variables, and a real run refuses only the steps
that need one. An undeclared variable is an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from drtool import yamlio
from drtool.environ import is_secret_name
from drtool.errors import NotFound, UsageError
from drtool.plans.schema import BUILT_IN_CHECK_TYPES, CONTRIBUTED, VARIABLE_NAME, Plan

_DUPLICATE_STEP = re.compile(r"step id '([^']+)' appears twice")
ENV_PREFIX = "DRTOOL_VAR_"  # the only environment variables a plan reads: DRTOOL_VAR_<NAME> for ${NAME}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
Loc = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan, where it is and what to do about it."""

    line: int | None
    message: str
    hint: str = ""
    severity: str = "error"  # or "warning": reported, does not make the plan invalid

    def render(self, path: Path | str, *, hint: bool = True) -> str:
        where = f"{path}:{self.line}" if self.line else str(path)
        return f"{where}: {self.severity}: {self.message}" + (f" ({self.hint})" if hint and self.hint else "")


@dataclasses.dataclass
class LoadedPlan:
    """A plan file parsed: the model (None when the schema rejected it), lines, variables and problems."""

    path: Path
    sha256: str
    data: Any
    lines: dict[Loc, int]
    unset: dict[str, int]  # variable -> first line it is used on
    undeclared: dict[str, int] = dataclasses.field(default_factory=dict)  # used, not under `variables:`
    plan: Plan | None = None
    problems: list[Problem] = dataclasses.field(default_factory=list)
    validated: bool = False  # graph, plugins and waivers checked too (drtool.plans.validate)

    def line_of(self, *loc: str | int) -> int | None:
        """The line of ``loc`` or of its closest ancestor that has one."""
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return None

    def step_line(self, step_id: str, *field: str | int) -> int | None:
        steps = self.data.get("steps") if isinstance(self.data, Mapping) else None
        for i, step in enumerate(steps or []):
            if isinstance(step, Mapping) and step.get("id") == step_id:
                return self.line_of("steps", i, *field)
        return None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def require(self) -> Plan:
        """The plan, or a one-line UsageError naming the first error (and how many more there are)."""
        errors = self.errors
        if self.plan is None or errors:
            first = errors[0] if errors else Problem(None, "the plan is invalid")
            more = f"; {len(errors) - 1} more" if len(errors) > 1 else ""
            raise UsageError(
                f"{first.render(self.path, hint=False)}{more}",
                first.hint if not more else f"`drtool plan validate {self.path}` lists them all",
            )
        return self.plan


class _LineLoader(yamlio.Loader):
    """Builds plain Python data and, beside it, the line of every mapping value and list item (no aliases)."""


def _compose_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> Any:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _LOADER_FOR_SCALARS.construct_object(key_node)
            if key in out:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            out[key] = _compose_lines(value_node, (*loc, key), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_compose_lines(item, (*loc, i), lines) for i, item in enumerate(node.value)]
    return _LOADER_FOR_SCALARS.construct_object(node, deep=True)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key)
        self.key, self.line = key, line


_LOADER_FOR_SCALARS = _LineLoader("")


@dataclasses.dataclass
class _Variables:
    """What ``${NAME}`` may become: the declared names, their values and defaults; what was used and missing."""

    declared: dict[str, str | None]  # name -> declared default
    values: dict[str, str]  # declared names that are set (values file, then environment)
    lines: dict[Loc, int]
    unset: dict[str, int]
    undeclared: dict[str, int]

    def fill(self, match: re.Match[str], loc: Loc) -> str:
        name, default = match.group(1), match.group(2)
        if name not in self.declared:
            self.undeclared.setdefault(name, self.lines.get(loc, 0))
            return match.group(0)
        if name in self.values:
            return self.values[name]
        if default is not None:
            return default
        if self.declared[name] is not None:
            return str(self.declared[name])
        self.unset.setdefault(name, self.lines.get(loc, 0))
        return match.group(0)


def _declared(raw: Mapping[str, Any]) -> dict[str, str | None]:
    """The plan's ``variables:`` as name -> default (the schema checks their shape and names afterwards)."""
    block = raw.get("variables")
    if not isinstance(block, Mapping):
        return {}
    out: dict[str, str | None] = {}
    for name, spec in block.items():
        if isinstance(name, str) and VARIABLE_NAME.match(name) and not is_secret_name(name):
            default = spec.get("default") if isinstance(spec, Mapping) else None
            out[name] = None if default is None else str(default).lower() if isinstance(default, bool) else str(default)
    return out


def _substitute(value: Any, loc: Loc, variables: _Variables) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, (*loc, k), variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, (*loc, i), variables) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def fill(match: re.Match[str]) -> str:
        return variables.fill(match, loc)

    filled = _VAR.sub(fill, value)
    # a value that was exactly one variable takes the variable's YAML type: `parallelism: ${PAR:-4}` is a number
    if _VAR.fullmatch(value) and filled != value:
        try:
            typed = yamlio.loads(filled)
        except (yaml.YAMLError, RecursionError):
            return filled
        return typed if isinstance(typed, int | float | bool) else filled
    return filled


def read_values(path: Path | None) -> dict[str, str]:
    """A values file: a flat YAML mapping of variable names to scalars."""
    if path is None:
        return {}
    if not path.is_file():
        raise NotFound(f"values file {path} not found", "pass an existing YAML file to --values")
    data = yamlio.load(path, "values file") or {}
    if not isinstance(data, dict) or not all(isinstance(v, str | int | float | bool) for v in data.values()):
        raise UsageError(f"values file {path} is not a flat mapping of NAME: value", "write one `NAME: value` a line")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in data.items()}


def load_plan(
    path: Path | str, *, values: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None
) -> LoadedPlan:
    """Parse and schema-check a plan file; problems are collected, not raised (see ``LoadedPlan.require``).

    ``values`` (a values file's content) win over ``env`` (default: the process environment), of which only
    ``DRTOOL_VAR_<NAME>`` is read, for a declared ``NAME``.
    """
    path = Path(path)
    if not path.is_file():
        raise NotFound(f"plan {path} not found", "give the path of a plan file, e.g. restore-plans/*.yaml")
    text = yamlio.read_text(path, "plan")
    lines: dict[Loc, int] = {}
    unset: dict[str, int] = {}
    loaded = LoadedPlan(path, hashlib.sha256(text.encode()).hexdigest(), None, lines, unset)
    try:
        node = yaml.compose(text, Loader=_LineLoader)
        raw = _compose_lines(node, (), lines) if node is not None else None
    except _DuplicateKey as dup:
        loaded.problems.append(Problem(dup.line, f"key {dup.key!r} appears twice", "keep one of them"))
        return loaded
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        loaded.problems.append(Problem(mark.line + 1 if mark else None, f"not valid YAML: {problem}"))
        return loaded
    except RecursionError:
        loaded.problems.append(Problem(None, "nested too deeply", "a plan is a few levels of mappings and lists"))
        return loaded
    if not isinstance(raw, dict):
        loaded.problems.append(Problem(1, "a plan is a YAML mapping", "start from a file in restore-plans/"))
        return loaded
    declared = _declared(raw)
    environment = os.environ if env is None else env
    from_env = {n: environment[ENV_PREFIX + n] for n in declared if ENV_PREFIX + n in environment}
    given = {**from_env, **(values or {})}  # never a variable by its own name
    set_values = {n: v for n, v in given.items() if n in declared}
    variables = _Variables(declared, set_values, lines, unset, loaded.undeclared)
    # the declarations themselves are not substituted: a default is a literal
    loaded.data = {k: v if k == "variables" else _substitute(v, (k,), variables) for k, v in raw.items()}
    loaded.problems += _variable_problems(loaded, set(values or ()) - set(declared))
    try:
        loaded.plan = Plan.model_validate(loaded.data)
    except ValidationError as exc:
        loaded.problems += [_schema_problem(loaded, err) for err in exc.errors()]
    return loaded


def _variable_problems(loaded: LoadedPlan, stray_values: set[str]) -> list[Problem]:
    """An undeclared ``${NAME}`` is an error (a secret-bearing one says why it can never be declared); a
    values-file entry the plan does not declare is a warning (it is not used)."""
    problems = []
    for name, line in sorted(loaded.undeclared.items(), key=lambda kv: kv[1]):
        if is_secret_name(name):
            hint = "secret-bearing names are never expanded in plans; name the variable in a `<field>_env` reference"
        else:
            hint = f"declare it: `variables: {{{name}: {{description: ..., default: ...}}}}` (docs/plans.md)"
        problems.append(Problem(line or None, f"${{{name}}} is not a declared variable of this plan", hint))
    for name in sorted(stray_values):
        problems.append(
            Problem(None, f"the values file sets {name}, which this plan does not declare", "not used", "warning")
        )
    return problems


def _schema_problem(loaded: LoadedPlan, err: Any) -> Problem:
    loc: Loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
    where = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[") or "plan"
    message = err["msg"].removeprefix("Value error, ")
    kind = err["type"]
    if kind == "extra_forbidden":
        return Problem(loaded.line_of(*loc), f"unknown field {where}", "check the spelling against docs/plans.md")
    if kind == "missing":
        return Problem(loaded.line_of(*loc[:-1]), f"missing field {where}", "docs/plans.md lists required fields")
    if not loc and (dup := _DUPLICATE_STEP.search(message)):  # a whole-plan rule: point at the second one
        lines = [loaded.line_of("steps", i) for i, s in enumerate(loaded.data["steps"]) if s.get("id") == dup[1]]
        return Problem(lines[-1], message, "give every step its own id")
    return Problem(loaded.line_of(*loc), f"{where}: {message}", _HINTS.get(kind, ""))


# pydantic puts a discriminated union's tag into the error location (checks[0].http.url); drop it
_UNION_TAGS = {*BUILT_IN_CHECK_TYPES, CONTRIBUTED, "str", "LatestBefore"}
_HINTS = {
    "literal_error": "docs/plans.md lists the allowed values",
    "int_parsing": "write a whole number",
    "datetime_from_date_parsing": "write an ISO time, e.g. 2026-11-29T10:00:00Z",
    "too_short": "a plan needs at least one step",
}
