"""Comparisons over sets of records: routes of one run, a baseline run against a candidate, the regression gate.

May import: measure and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
