"""Bundles: the genai config, routing rules (config + target -> route plan), derived bundles under _compiled/, the artifact cache, compile, placement, preparing plain .onnx models.

May import: session and the floors below it (not synth). Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
