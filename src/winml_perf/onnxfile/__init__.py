"""Readers of .onnx files (protobuf wire format, model headers) that need neither onnx nor onnxruntime.

May import: model, support. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
