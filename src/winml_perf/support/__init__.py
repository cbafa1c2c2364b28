"""The ground floor: errors and exit codes, JSON input checked at the edge, stdout/stderr, child processes.

May import: nothing from winml_perf. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
