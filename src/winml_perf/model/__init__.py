"""The typed spine every layer may import: routes, placement, metrics, samples and the run record.

Nothing here imports onnxruntime, or any other winml_perf room but support (errors).

May import: support. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
