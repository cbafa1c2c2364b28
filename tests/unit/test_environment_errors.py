"""A full disk or a read-only folder is the machine's state, not a bug: exit 2 naming the path, at the
one place the CLI turns exceptions into exit codes (issue 27; before: 'unexpected OSError', exit 1)."""

from __future__ import annotations

import errno

import pytest

from winml_perf import cli


def _raising(exc):
    """A stand-in for the CLI's command tree (cli._command) whose command raises ``exc``."""

    def command(*_, **__):
        raise exc

    return lambda: command


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_write_the_machine_refuses_is_exit_2_naming_the_path(monkeypatch, capsys, code):
    monkeypatch.setattr(cli, "_command", _raising(OSError(code, "refused", "/data/results/winml-perf.db")))
    with pytest.raises(SystemExit) as ended:
        cli.main(["results", "list"])
    err = capsys.readouterr().err
    assert ended.value.code == 2
    assert "/data/results/winml-perf.db" in err and f"errno {code}" in err
    assert "unexpected" not in err and "records stored before this error are kept" in err


def test_another_os_error_is_still_unexpected(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_command", _raising(OSError(errno.EIO, "input/output error", "/dev/sdz")))
    with pytest.raises(SystemExit) as ended:
        cli.main(["results", "list"])
    assert ended.value.code == 1 and "unexpected OSError" in capsys.readouterr().err
