"""Running the benchmark: orchestrate (resolve -> prepare -> sweep -> store), the sweep, the cell driver and its two schedules, stopping, progress; hosting/ holds where a session lives (in process or a child).

May import: results and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
