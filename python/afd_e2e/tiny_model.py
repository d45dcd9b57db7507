"""Build the embedded default's tiny random-weight MoE model locally and deterministically (no download).

A byte-level BPE tokenizer trained on this Python's standard-library sources, and a seeded Qwen3-MoE causal LM
small enough for vLLM's CPU backend (head_dim 32, sizes divisible by 32). Its outputs are deterministic but
meaningless: it exists to exercise the harness against the real engine.
"""

from __future__ import annotations

import fcntl
import json
import sysconfig
from pathlib import Path

SERVED_ARCHITECTURE = "Qwen3MoeForCausalLM"
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
VOCAB_SIZE = 2048
SEED = 0


def _training_text() -> list[str]:
    """A fixed, sorted slice of the standard library: the same bytes on every machine with this Python."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py"))[:120]
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def build_model(out: Path) -> None:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(SEED)
    config = Qwen3MoeConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        max_position_embeddings=2048,
        eos_token_id=0,
        pad_token_id=1,
        bos_token_id=0,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def build_tiny_model(out: Path) -> Path:
    """Write tokenizer and model into ``out`` (idempotent: an existing complete model is kept).

    One build at a time per folder (a lock file beside it): CI's embedded default and the engine tier start
    together from a fresh clone, and a second builder rewriting the files under a server the first one started
    would serve it a half-written checkpoint."""
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "afd-e2e-tiny-model.json"
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if marker.exists() and (out / "config.json").exists():
            return out
        build_tokenizer(out)
        build_model(out)
        marker.write_text(
            json.dumps({"architecture": SERVED_ARCHITECTURE, "seed": SEED, "random_weights": True}) + "\n"
        )
    return out
