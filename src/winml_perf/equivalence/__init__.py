"""Is a route still the same model? Every check that answers it, before the sweep (docs/equivalence.md).

- check.py: the teacher-forced check of a genai bundle's routes against a reference (issue 24).
- verdict_cache.py: verdicts kept by content, so a second run over the same bundles judges nothing.
- onnx_outputs.py: a plain ONNX model's routes, every output against the reference route's.
- perplexity.py: --perplexity, each route's perplexity over a text and its ratio to the reference's.
- pooled.py: the tune's check on fixed prompts, a route near its limit judged on three.
- passes/: what runs sessions for the checks: teacher-forced logits, layer passes, the models, sessions
  and variants kept for one check.

The math and the thresholds are stats/'s (stats/equivalence.py, stats/layer_equivalence.py,
stats/outputs/, stats/perplexity.py: pure functions); the record's types are model/'s.

May import: bundle, synth and the floors below them. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""
