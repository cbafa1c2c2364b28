"""Explain a route: where one prompt pass and one decode step spend their time.

Layers, bottom up: ``profile`` parses onnxruntime's profiler output (chrome-trace JSON) into runs
of nodes; ``breakdown`` turns the runs of each stage plus the wall-clock time of the same calls into
a per-phase breakdown (stage session time, operator time per op type and EP, copies and their
bytes, and the host time no session accounts for); ``difference`` compares two breakdowns;
``text`` renders both. ``genai_run`` and ``onnx_run`` run the profiled session (they import
onnxruntime); everything else is plain data and imports nothing from measure/ or results/.

May import: bundle, synth and the floors below them. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
