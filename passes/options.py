"""Pass options on the command line: their types, allowed values and error messages.

xDSL turns `-p 'aicfc-fuse{patterns=1}'` into the pass's dataclass fields and
reports a bad value as `Incompatible types: given (1,), expected <class 'str'>`.
`check_options` checks a pass spec first and says the same in a user's terms:

    option 'patterns' of aicfc-fuse expects a string (one of all, forward, backward), got 1
    aicfc-fuse has no option 'zz' (its options: patterns)

`PassOptionError` is the error a pass raises for an option that is only found
to be wrong when the pass runs (aicfc-analyze{function=nope} names a function
the module lacks); aicfc-opt prints it as `aicfc-opt: error: ...`.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException


class PassOptionError(DiagnosticException):
    """A pass option that is wrong for the module or the command line (not an IR error)."""


class PassPipelineError(PassOptionError, ValueError):
    """A pass pipeline text (`-p`, `aicfc.run_pipeline`) with bad syntax, an unknown pass
    or a bad option; a ValueError too, as xDSL's pipeline parser raises."""


XDSL_PASSES = ("canonicalize", "cse", "dce")
"""The xDSL passes aicfc-opt registers and the messages list (the generic rewrites the
pipeline and the docs use; the rest of xDSL's passes target other dialects)."""

QUOTING_HINT = (
    "a string option value other than a plain word needs double quotes, e.g. "
    'aicfc-lower-exec{autotune_cache="at.json"} (on a shell command line, quote the '
    "whole -p argument: -p 'aicfc-lower-exec{autotune_cache=\"at.json\"}')"
)


def check_pipeline(
    text: str, available: Mapping[str, Callable[[], type[ModulePass]]]
) -> list[ArgSpec]:
    """The pass specs of pipeline `text` after checking each pass name and its options
    against `available` (name -> pass class factory); PassPipelineError otherwise, with
    the message aicfc-opt prints after `aicfc-opt: error: `."""
    try:
        specs = list(parse_pipeline(text))
    except ArgSpecParseError as e:  # a BaseException in xDSL: catch it by name
        hint = f"\n({QUOTING_HINT})" if "Unknown token" in str(e) else ""
        raise PassPipelineError(f"bad pass pipeline '{text}':\n{str(e).rstrip()}{hint}") from None
    for spec in specs:
        if spec.name not in available:
            ours = sorted(n for n in available if n.startswith("aicfc"))
            close = difflib.get_close_matches(spec.name, [*ours, *XDSL_PASSES], n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise PassPipelineError(
                f"unknown pass '{spec.name}'; {hint}available: {', '.join(ours)} and xDSL's "
                f"({', '.join(XDSL_PASSES)}); see docs/passes.md"
            )
        try:
            check_options(spec, available[spec.name]())
        except PassOptionError as e:
            raise PassPipelineError(f"bad pass options in '{text}': {e}") from None
    return specs


def _backends() -> tuple[str, ...]:
    from aicfc.runtime.backend_names import BACKEND_CHOICES

    return BACKEND_CHOICES


def _fuse_patterns() -> tuple[str, ...]:
    from aicfc.passes.fusion.patterns import PATTERN_GROUPS

    return tuple(PATTERN_GROUPS)


def _autocast_dtypes() -> tuple[str, ...]:
    from aicfc.passes.aicfc_autocast import LOW_DTYPES

    return tuple(LOW_DTYPES)


def _pipeline_precisions() -> tuple[str, ...]:
    from aicfc.passes.aicfc_autocast import PIPELINE_PRECISIONS

    return PIPELINE_PRECISIONS


CHOICES: dict[tuple[str, str], Callable[[], tuple[str, ...]]] = {
    ("aicfc-train-pipeline", "precision"): _pipeline_precisions,
    ("aicfc-autocast", "dtype"): _autocast_dtypes,
    ("aicfc-fuse", "patterns"): _fuse_patterns,
    ("aicfc-lower-exec", "backend"): _backends,
    ("aicfc-fuse-train-step", "backend"): _backends,
    ("aicfc-train-pipeline", "backend"): _backends,
}
"""(pass, option) -> the allowed values of a string option (read from the tables that
define them, so this list cannot go stale)."""

_TYPE_WORDS: dict[object, str] = {
    str: "a string",
    bool: "a boolean (true or false)",
    int: "an integer",
    float: "a number",
}


def _base(t: object) -> object:
    """`T` of `T | None`, else `t`."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0] if len(args) == 1 else t
    return t


def _fits(value: object, t: object) -> bool:
    if t is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(t, type) and isinstance(value, t)


def describe_type(pass_name: str, option: str, t: object) -> str:
    """`a string (one of all, forward, backward)`, `an integer`, ... for messages and docs."""
    t = _base(t)
    if typing.get_origin(t) is tuple:
        (item, *_) = typing.get_args(t)
        return f"a comma-separated list of {_TYPE_WORDS.get(item, str(item))[2:]}s"
    words = _TYPE_WORDS.get(t, str(t))
    choices = CHOICES.get((pass_name, option))
    return f"{words} (one of {', '.join(choices())})" if choices else words


def _show(values: tuple[object, ...]) -> str:
    text = ",".join("true" if v is True else "false" if v is False else str(v) for v in values)
    return text or "nothing"


def check_options(spec: ArgSpec, cls: type[ModulePass]) -> None:
    """Raise PassOptionError for an option of `spec` that `cls` lacks or a value of the
    wrong type; values of the right type are left to the pass (its __post_init__)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "name"}
    hints = typing.get_type_hints(cls)
    for option, values in spec.normalize_parameter_names().parameters.items():
        if option not in fields:
            known = ", ".join(fields) if fields else None
            raise PassOptionError(
                f"{spec.name} has no option '{option}' "
                + (f"(its options: {known})" if known else "(it takes no options)")
            )
        t = _base(hints[option])
        if typing.get_origin(t) is tuple:
            (item, *_) = typing.get_args(t)
            ok = all(_fits(v, item) for v in values)
        else:
            ok = len(values) == 1 and _fits(values[0], t)
        if not ok:
            raise PassOptionError(
                f"option '{option}' of {spec.name} expects "
                f"{describe_type(spec.name, option, t)}, got {_show(values)}"
            )
