"""The typed spine every layer may import: routes, placement, metrics, samples and the run record.

Nothing here imports onnxruntime or any other winml_perf package but ``errors``.
"""
