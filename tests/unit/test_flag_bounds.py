"""Every numeric flag of every command is bounded: a bad value is exit 2 naming the flag, never an
unexpected error, an overflow, or a run that asks onnxruntime for a million threads."""

from __future__ import annotations

import typing
from dataclasses import dataclass

import pytest
import typer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from winml_perf import cli
from winml_perf.commands.numeric_flags import flag_name
from winml_perf.model import flag_bounds
from winml_perf.support.errors import WinmlPerfError

TEXT_METAVARS = ("PCT", "N", "N|auto", "AGE", "WHEN")


@dataclass(frozen=True)
class NumericFlag:
    command: tuple[str, ...]
    flag: str
    kind: str  # "int" | "float" | the metavar of a text flag holding numbers
    required: tuple[str, ...]  # what the command needs besides the flag, to get as far as its check


def _required_args(command) -> tuple[str, ...]:
    out: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        out += ["placeholder"] if not param.opts[0].startswith("-") else [flag_name(param), "placeholder"]
    return tuple(out)


def _kind(param) -> str | None:
    """'int' or 'float' for a typed numeric option, the metavar for a text option holding numbers."""
    annotation = param.type_descriptor.annotation
    types = {annotation, *typing.get_args(annotation)}
    for inner in list(types):
        types.update(typing.get_args(inner))  # list[int]
    if int in types:
        return "int"
    if float in types:
        return "float"
    if str in types and param.metavar in TEXT_METAVARS:
        return param.metavar
    return None


def _numeric_flags() -> list[NumericFlag]:
    found = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
            return
        for param in command.params:
            kind = _kind(param)
            if kind and param.opts[0].startswith("-"):
                found.append(NumericFlag(path, flag_name(param), kind, _required_args(command)))

    walk(ROOT, ())
    return found


ROOT = typer.main.get_command(cli.app)  # built once: the property test parses hundreds of command lines
FLAGS = _numeric_flags()


def _parse_and_check(args: list[str]) -> tuple[int, str]:
    """What the CLI would exit with for ``args`` and its message, stopping at the first error:
    parsing and the numeric check run, the command never does (its check refuses first)."""
    try:
        ROOT.main(args=args, standalone_mode=False)
    except WinmlPerfError as exc:
        return exc.exit_code, str(exc)
    except cli._CLICK_USAGE_ERROR as exc:
        return 2, exc.format_message()
    return 0, "the command ran"


def _run(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        cli._main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out + captured.err


def test_the_walk_finds_the_numeric_flags_of_every_command():
    names = {(f.command, f.flag) for f in FLAGS}
    for expected in [
        (("perf",), "--intra-op-threads"),
        (("perf",), "--target-ci"),
        (("perf",), "--prompt-tokens"),
        (("results", "list"), "--limit"),
        (("results", "prune"), "--older-than"),
        (("compare", "routes"), "--resamples"),
        (("dashboard",), "--jobs"),
    ]:
        assert expected in names


@pytest.mark.parametrize("flag", sorted({f.flag for f in FLAGS if f.kind != "WHEN"}))
def test_every_numeric_flag_has_its_own_bounds(flag):
    assert flag in flag_bounds.BOUNDS, f"{flag}: add its bounds to model/flag_bounds.py"


def _bad_number(kind: str, bound: flag_bounds.Bound) -> st.SearchStrategy[str]:
    high, low = int(bound.high), int(bound.low)
    too_big = st.integers(min_value=high + 1, max_value=10**40)
    non_finite = st.sampled_from(["inf", "nan", "1e400", "-inf"])
    if kind in ("AGE", "WHEN"):
        days = st.integers(min_value=flag_bounds.MAX_AGE_DAYS * 10_080 + 1, max_value=10**30)
        return st.builds(lambda n, unit: f"{n}{unit}", days, st.sampled_from("dhmw"))
    if kind in ("N", "N|auto"):
        return too_big.map(str)
    if kind == "PCT":
        return st.one_of(too_big.map(lambda n: f"{n}%"), non_finite, non_finite.map(lambda t: t + "%"))
    below = st.integers(min_value=-(10**40), max_value=low - 1).map(str)
    return st.one_of(too_big.map(str), below, non_finite)


@st.composite
def _bad_flag(draw) -> tuple[NumericFlag, str]:
    numeric = draw(st.sampled_from(FLAGS))
    bound = flag_bounds.BOUNDS.get(numeric.flag, flag_bounds.FALLBACK_INT)
    return numeric, draw(_bad_number(numeric.kind, bound))


@settings(max_examples=300, deadline=None)
@given(_bad_flag())
def test_a_bad_value_of_any_numeric_flag_is_exit_2_naming_it(case):
    numeric, value = case
    code, output = _parse_and_check([*numeric.command, *numeric.required, numeric.flag, value])
    assert code == 2, output
    assert numeric.flag in output and "unexpected" not in output


@pytest.mark.parametrize(
    "args",
    [
        ["results", "list", "--limit", "99999999999999999999"],
        ["perf", "placeholder", "--prompt-tokens", "99999999999999999999"],
        ["perf", "placeholder", "--max-new-tokens", "16-99999999999999999999*2"],
        ["results", "prune", "--older-than", "99999999999d"],
        ["perf", "placeholder", "--target-ci", "inf"],
        ["perf", "placeholder", "--target-ci", "1e400%"],
        ["perf", "placeholder", "--intra-op-threads", "1000000"],
        ["perf", "placeholder", "--inter-op-threads", "1000000"],
        ["perf", "placeholder", "--seed", "99999999999999999999"],
        ["perf", "placeholder", "--max-time", "inf"],
        ["compare", "routes", "--resamples", "10000000000"],
        ["dashboard", "--jobs", "99999999999999999999"],
    ],
)
def test_the_reported_cases_are_exit_2_naming_the_flag(capsys, args):
    code, output = _run(args, capsys)
    assert code == 2 and args[-2] in output and "out of range" in output, output


@settings(deadline=None)
@example("1x3x99999999999999999999")
@given(st.integers(min_value=2**31, max_value=10**30).map(lambda n: f"1x{n}"))
def test_a_shape_dimension_is_bounded(dims):
    from winml_perf.session.onnx_inputs import parse_dims
    from winml_perf.support.errors import UsageError

    with pytest.raises(UsageError, match="--shape"):
        parse_dims(dims)


def test_values_in_range_pass():
    for flag, value in [("--iterations", 5), ("--intra-op-threads", 0), ("--target-ci", 0.5), ("--seed", 2**32 - 1)]:
        assert flag_bounds.check(flag, value) == value
