"""lm: the causal language model every step shares — a tiny char-level one for the demo, any HF model otherwise."""
