"""The format registry (publish/formats.py) is the one list of formats: every command's --format
help and check come from it, an exporter's module adds its format to it, and each format's
renderer is found through it."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from winml_perf.cli import app
from winml_perf.publish import exporters, formats
from winml_perf.publish.formats import Format, Offer, Rows, check_format, format_help, offered, shown_text
from winml_perf.support.errors import EXIT_USAGE, UsageError

#: Every command with a --format option, and what it offers.
OFFERS = {
    ("perf",): Offer.ROWS,
    ("devices",): Offer.ROWS,
    ("bundle", "show"): Offer.ROWS,
    ("results", "list"): Offer.ROWS,
    ("results", "show"): Offer.ROWS,
    ("compare", "routes"): Offer.ROWS,
    ("compare", "runs"): Offer.ROWS,
    ("tune",): Offer.SUMMARY,
    ("serve",): Offer.SUMMARY,
    ("bundle", "synth"): Offer.SUMMARY,
    ("bundle", "from-gguf"): Offer.SUMMARY,
    ("bundle", "prepare"): Offer.SUMMARY,
    ("results", "export"): Offer.EXPORT,
}


def _format_options(command, path=()):
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _format_options(sub, (*path, name))
    for param in getattr(command, "params", []):
        if "--format" in param.opts:
            yield path, param.help


def test_every_format_option_takes_its_help_from_the_registry():
    found = dict(_format_options(typer.main.get_command(app)))
    assert set(found) == set(OFFERS)  # a new --format option is added here with its offer
    for path, help_text in found.items():
        listed = format_help(OFFERS[path]).removesuffix(".")
        assert help_text.startswith(listed), (path, help_text)
    assert format_help(Offer.SUMMARY) == "table or json."
    assert format_help(Offer.ROWS, "on stdout") == "table, json, jsonl, csv or markdown on stdout."
    assert "gab-smaller (" in format_help(Offer.EXPORT) and "gab," not in format_help(Offer.EXPORT)  # gab unlisted


@pytest.mark.parametrize(
    "argv",
    [
        ["perf", "bundles/tiny-qwen2"],
        ["devices"],
        ["bundle", "show", "bundles/tiny-qwen2"],
        ["results", "list", "--store", "{store}"],
        ["results", "show", "1", "--store", "{store}"],
        ["compare", "routes", "--store", "{store}"],
        ["compare", "runs", "a", "b", "--store", "{store}"],
        ["tune", "bundles/tiny-qwen2"],
        ["serve", "bundles/tiny-qwen2"],
        ["bundle", "synth", "-o", "{tmp}/synth"],
        ["bundle", "from-gguf", "{tmp}/m.gguf", "-o", "{tmp}/gguf"],
        ["bundle", "prepare", "bundles/tiny-qwen2"],
        ["results", "export", "--store", "{store}"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith(("{", "bundles", "-"))),
)
def test_an_unknown_format_on_each_command_exits_2_naming_what_it_offers(argv, tmp_path):
    args = [a.format(store=tmp_path / "s.db", tmp=tmp_path) for a in argv]
    offer = OFFERS[tuple(a for a in argv[:2] if a in {p for path in OFFERS for p in path})]
    result = CliRunner().invoke(app, [*args, "--format", "xml"])
    err = result.exception
    assert isinstance(err, UsageError), result.output
    assert err.exit_code == EXIT_USAGE
    assert f"--format 'xml' is not one of {', '.join(offered(offer))}" in str(err)
    assert not (tmp_path / "s.db").exists()  # refused before any work


def test_the_registry_is_the_one_list_of_formats():
    assert offered(Offer.ROWS) == ("table", "json", "jsonl", "csv", "markdown")
    assert offered(Offer.SUMMARY) == ("table", "json")
    assert tuple(exporters.exporters()) == offered(Offer.EXPORT)  # each export format has its exporter
    assert offered(Offer.RUN_FILE) == ("json", "jsonl", "csv", "markdown")
    every = formats.formats()
    for name, fmt in every.items():
        assert fmt.name == name and fmt.offers and fmt.renders
        shown_here = fmt.offers & {Offer.ROWS, Offer.SUMMARY, Offer.RUN_FILE}
        assert (fmt.render is not None) == bool(shown_here), name  # a renderer exactly where a command shows it
        assert (fmt.suffix is not None) == bool(fmt.offers & {Offer.EXPORT, Offer.RUN_FILE}), name  # a file's
    assert [n for n, f in every.items() if f.terminal] == ["table"]
    assert [n for n, f in every.items() if f.holds_document] == ["json"]
    with pytest.raises(ValueError, match="two formats"):
        formats.register(Format("csv", "again", frozenset({Offer.ROWS})))


def test_each_format_renders_through_its_entry_and_a_view_replaces_the_table():
    shown = Rows({"a": 1}, [{"a": 1}, {"a": 2}], ["a"], [[1.5]], view=lambda: "own view\n")
    out = {name: shown_text(name, shown) for name in offered(Offer.ROWS)}
    assert out["table"] == "own view\n"
    assert json.loads(out["json"]) == {"a": 1} and out["jsonl"] == '{"a":1}\n{"a":2}\n'
    assert out["csv"] == "a\n1.5\n" and out["markdown"].startswith("| a")


def test_an_export_whose_files_are_named_json_writes_json(tmp_path):
    from tests.results_fakes import make_cell
    from winml_perf.results import load
    from winml_perf.results.store import open_store

    with open_store(tmp_path / "r.db") as store:
        store.write_json_record(make_cell("a" * 32))
        store.write_json_record(make_cell("b" * 32, route="ep=cpu"))
        df = load(store)
    suffixes = {name: formats.format_named(name).suffix for name in offered(Offer.EXPORT)}
    assert suffixes["csv"] == ".csv" and suffixes["markdown"] == ".md" and suffixes["jsonl"] == ".jsonl"
    for name, suffix in suffixes.items():
        text = exporters.export(df, name, direction="bigger")
        if suffix == ".json":
            assert json.loads(text), name
        else:
            with pytest.raises(json.JSONDecodeError):
                json.loads(text)


def test_an_exporter_module_adds_its_format_to_the_registry(monkeypatch):
    """A new export format is its module (and a test): registering it makes it offered, listed in
    --help and accepted by the check, with no third file."""
    monkeypatch.setattr(formats, "_FORMATS", dict(formats._FORMATS))
    monkeypatch.setattr(exporters, "_REGISTRY", dict(exporters._REGISTRY))
    psv = Format("psv", "pipe-separated rows", frozenset({Offer.EXPORT}), suffix=".psv")
    exporters.register(exporters.Exporter("psv", lambda df, **_: "a|b\n"), psv)
    assert offered(Offer.EXPORT)[-1] == "psv" and format_help(Offer.EXPORT).endswith(" or psv.")
    assert check_format(Offer.EXPORT, "psv") == "psv" and exporters.get("psv").name == "psv"
    with pytest.raises(UsageError, match="is not one of table, json"):
        check_format(Offer.ROWS, "psv")  # offered for export only
    with pytest.raises(ValueError, match="no format offered for export"):
        exporters.register(exporters.Exporter("yaml", lambda df, **_: ""))


def test_an_option_applies_to_the_exporters_that_take_it():
    assert exporters.check_options("gab", direction="bigger").name == "gab"
    with pytest.raises(UsageError, match="--direction applies to --format gab only") as err:
        exporters.check_options("csv", direction="bigger")
    assert err.value.exit_code == EXIT_USAGE
    with pytest.raises(UsageError, match="--format gab needs a direction"):
        exporters.check_options("gab", direction=None)
    assert exporters.check_options("csv", direction=None).name == "csv"
