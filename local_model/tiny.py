"""SmolLM2's layout (Llama, GQA, tied embeddings, its vocabulary) at toy width and depth.

Random weights, seeded: a model the trainer's tests and the training benches can load and step
on a CPU in seconds, with no download. The caller adds the tokenizer beside it.
"""

from __future__ import annotations

from pathlib import Path


def save_tiny_smollm2(directory: Path) -> Path:
    """Write the toy model's config and weights into `directory` and return it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        max_position_embeddings=2048,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory
