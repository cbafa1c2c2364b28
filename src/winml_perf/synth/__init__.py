"""Synthetic random-weight bundles (the `synth` extra): transformer builder, decoder pipeline, static-shape NPU pipeline.

May import: session and the floors below it (not bundle). Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
