"""winml-perf: benchmark ONNX Runtime GenAI bundles with EP routing as a measured variable."""

__version__ = "0.1.0"
