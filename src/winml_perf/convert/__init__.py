"""Real models into onnxruntime-genai bundles: a GGUF file's weights and tokenizer, no torch, no hub."""
