"""Runtime sessions: what the runner measures through.

May import: ep and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
