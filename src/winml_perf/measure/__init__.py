"""Running the benchmark: orchestrate (resolve -> prepare -> sweep -> store), the sweep, the cell driver and its two schedules, hosts and isolation, stopping, progress.

May import: results and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
