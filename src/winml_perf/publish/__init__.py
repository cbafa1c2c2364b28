"""What people read: text tables, exporters (one per format), the dashboard.

May import: compare and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
