"""A route's refusals name only the flags that asked for it: `winml bundle prepare` has no --route, so
its stages and EP options are named by --stages and --ep-option alone; `winml perf --route SPEC` names
the spec's own parts beside the flags, and `winml perf --ep/--stages` the flags the user gave."""

from __future__ import annotations

import pytest

from tests.conftest import BUNDLES

TINY = str(BUNDLES / "tiny-qwen2")


def _main(capsys, *args: str) -> tuple[int, str]:
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(list(args))
    return int(ended.value.code or 0), " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "args, words",
    [
        (("--ep", "cpu", "--stages", "nope"), "stages (--stages) name nope"),
        (("--ep", "cpu", "--ep-option", "foo=1"), "EP options (--ep-option) do not apply to the CPU EP"),
    ],
)
def test_bundle_prepare_names_only_its_own_flags(capsys, args, words):
    code, err = _main(capsys, "bundle", "prepare", TINY, *args)
    assert code == 2 and words in err, err
    assert "--route" not in err


@pytest.mark.parametrize(
    "args, words",
    [
        (("--route", "ep=cpu;stages=nope"), "stages (--stages, or ';stages=' in --route) name nope"),
        (("--route", "ep=cpu;options=foo=1"), "EP options (--ep-option, or ';options=' in --route) do not apply"),
        (("--ep", "cpu", "--stages", "nope"), "stages (--stages) name nope"),
    ],
)
def test_perf_names_the_route_syntax_only_for_a_route_spec(capsys, args, words):
    code, err = _main(capsys, "perf", TINY, "--no-store", *args)
    assert code == 2 and words in err, err
