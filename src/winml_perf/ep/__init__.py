"""Execution providers: the EP table (one entry per EP carries every fact), provider options, devices and resolving a target, a route as asked and as resolved (route_request, resolved), plugin EP libraries, the child-process context.

May import: stats, onnxfile, model, support. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
