"""A sub-room of stats/: a plain ONNX model's output tensors against a reference's (issue 24).

- equivalence: per-output max abs / relative error and cosine, a verdict per output and per route.

May import: model, support. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
