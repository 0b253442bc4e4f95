"""Generators of sample runs: ``jaxrun`` writes a run folder from a real JAX training job on CPU."""
