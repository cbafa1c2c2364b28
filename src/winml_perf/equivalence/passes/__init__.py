"""A sub-room of equivalence/: the passes the checks run, and what one check keeps between them.

- genai_logits.py: a bundle's teacher-forced logits through onnxruntime-genai.
- layer_outputs.py: one full-sequence pass of a stage file through plain onnxruntime.
- shared_passes.py: a stage file's layer pass, run once per check for every route that runs it alike.
- layers_ahead.py: the routes' layer passes, run in a second thread beside their teacher-forced passes.
- model_pool.py: loaded models and layer sessions kept for one check over several prompts.
- kept_variants.py: the reference's band variants kept for one check over several prompts.

May import: bundle, synth and the floors below them. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
