"""Building a cell's record from a measured cell: summaries, typed warnings, environment, roofline, validation against the schema.

May import: explain and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
