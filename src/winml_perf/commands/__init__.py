"""The Typer apps of `winml`: parse flags, call the library, render. cli.py only mounts them.

May import: every room. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
