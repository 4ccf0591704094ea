"""Inference backends: where rollouts are sampled (torch in-process on CPU, vLLM servers on GPU)."""
