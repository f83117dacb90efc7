"""Handwritten models shared by the integration tests and the benchmarks.

* :class:`MLP` — linear layers with GELU;
* :class:`CNN` — convolutions, batch norm, pooling by mean;
* :class:`GPT` — a decoder-only transformer: embeddings, pre-norm blocks with causal
  self-attention written out by hand (views, transposes, masking, softmax) and an MLP;
* :class:`TinyLlama` — Llama's shape built from ``torch.nn`` alone: RMS norms, rotary
  position embeddings, causal ``scaled_dot_product_attention``, a SwiGLU MLP, no biases.

They use only what ordinary model code uses, so that capturing them whole is a fair test.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width: int = 32, depth: int = 3, classes: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return self.head(x)


class CNN(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.norm(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        head_dim = dim // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
        q = q.view(batch, tokens, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, tokens, self.heads, head_dim).transpose(1, 2)
        v = v.view(batch, tokens, self.heads, head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        causal = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        attended = (weights @ v).transpose(1, 2).reshape(batch, tokens, dim)
        x = x + self.proj(attended)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` (batch, heads, tokens, head_dim), halves rotated."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)


class LlamaBlock(nn.Module):
    """Pre-norm attention (rotary, causal SDPA) and a SwiGLU MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        h = self.attn_norm(x)
        q, k, v = (
            proj(h).view(batch, tokens, self.heads, dim // self.heads).transpose(1, 2)
            for proj in (self.q, self.k, self.v)
        )
        y = nn.functional.scaled_dot_product_attention(
            _rotate(q, cos, sin), _rotate(k, cos, sin), v, is_causal=True
        )
        x = x + self.o(y.transpose(1, 2).reshape(batch, tokens, dim))
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class TinyLlama(nn.Module):
    """A Llama-shaped causal language model: token ids in, logits out."""

    def __init__(
        self,
        vocab: int = 128,
        dim: int = 64,
        heads: int = 4,
        layers: int = 2,
        hidden: int = 172,
        max_tokens: int = 256,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(LlamaBlock(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        half = dim // heads // 2
        inverse = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(max_tokens, dtype=torch.float32), inverse)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        count = tokens.shape[1]
        cos, sin = self.cos[:count], self.sin[:count]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


class CountingBackend:
    """A named backend (eager by default) that also keeps every graph it is given, to count
    graphs and ops."""

    def __init__(self, name: str = "eager") -> None:
        import sapwood_backend

        self.inner = sapwood_backend.lookup_backend(name)
        self.graphs: list[torch.fx.GraphModule] = []

    @property
    def count(self) -> int:
        """The graphs given so far."""
        return len(self.graphs)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[object]) -> object:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def output_tensors(output: object) -> list[torch.Tensor]:
    """The tensors of a model's output in order (a Hugging Face ``ModelOutput`` or any pytree)."""
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    leaves = torch.utils._pytree.tree_leaves(values)
    return [v for v in leaves if isinstance(v, torch.Tensor)]


def build(name: str, device: str = "cpu") -> tuple[nn.Module, torch.Tensor]:
    """A seeded model and an example input: ``mlp``, ``cnn`` or ``gpt``."""
    torch.manual_seed(0)
    if name == "mlp":
        model, example = MLP(), torch.randn(6, 32)
    elif name == "cnn":
        model, example = CNN(), torch.randn(2, 3, 12, 12)
    elif name == "gpt":
        model, example = GPT(), torch.randint(0, 64, (2, 8))
    else:
        raise ValueError(f"no model named {name!r}")
    return model.to(device), example.to(device)


NAMES = ("mlp", "cnn", "gpt")


# ----------------------------------------------------------------- Hugging Face, tiny configs
# Built from configs with no weights (nothing is downloaded), dropout off so that training
# runs can be compared step by step. ``transformers`` is a test dependency; callers skip when
# it is missing.

HF_NAMES = ("gpt2", "bert", "llama", "t5", "vit", "mistral")
#: encoder-decoder, audio and other architectures whose library code uses more of Python
#: (config deep copies, custom autograd functions, version checks)
HF_MORE_NAMES = ("mt5", "bart", "marian", "pegasus", "whisper", "bloom", "gemma2", "wav2vec2")
_TINY = {"vocab_size": 99, "max_position_embeddings": 64}
_DECODER = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    **_TINY,
}


_NO_GPT2_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
#: T5 and mT5 share their architecture: one tiny size for both
_T5_SIZES = {
    "d_model": 32,
    "d_kv": 8,
    "d_ff": 64,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 4,
    "vocab_size": 99,
    "decoder_start_token_id": 0,
    "dropout_rate": 0.0,
}
_NO_BERT_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
_SEQ2SEQ = {
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "encoder_layerdrop": 0.0,
    "decoder_layerdrop": 0.0,
    "pad_token_id": 1,
    "decoder_start_token_id": 2,
    "eos_token_id": 2,
    **_TINY,
}


def build_hf(name: str, device: str = "cpu") -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A seeded tiny Hugging Face model and its keyword inputs (with ``labels`` where it has a loss)."""
    import transformers as t

    torch.manual_seed(0)
    ids = torch.randint(0, 99, (2, 8))
    if name == "gpt2":
        config = t.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, vocab_size=99, n_positions=64, **_NO_GPT2_DROPOUT
        )
        model, inputs = t.GPT2LMHeadModel(config), {"input_ids": ids, "labels": ids}
    elif name == "bert":
        config = t.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            **_TINY,
            **_NO_BERT_DROPOUT,
        )
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 6:] = 0
        model, inputs = (
            t.BertForMaskedLM(config),
            {"input_ids": ids, "attention_mask": mask, "labels": ids},
        )
    elif name == "llama":
        model, inputs = (
            t.LlamaForCausalLM(t.LlamaConfig(**_DECODER)),
            {"input_ids": ids, "labels": ids},
        )
    elif name == "mistral":
        config = t.MistralConfig(sliding_window=4, **_DECODER)
        model, inputs = t.MistralForCausalLM(config), {"input_ids": ids, "labels": ids}
    elif name == "t5":
        config = t.T5Config(**_T5_SIZES)
        model, inputs = (
            t.T5ForConditionalGeneration(config),
            {"input_ids": ids, "labels": ids[:, :5].contiguous()},
        )
    elif name == "mt5":
        config = t.MT5Config(**_T5_SIZES)
        model, inputs = (
            t.MT5ForConditionalGeneration(config),
            {"input_ids": ids, "labels": ids[:, :5].contiguous()},
        )
    elif name in ("bart", "marian", "pegasus"):
        kinds = {
            "bart": (t.BartConfig, t.BartForConditionalGeneration),
            "marian": (t.MarianConfig, t.MarianMTModel),
            "pegasus": (t.PegasusConfig, t.PegasusForConditionalGeneration),
        }
        config_class, model_class = kinds[name]
        model = model_class(config_class(**_SEQ2SEQ))
        inputs = {"input_ids": ids, "labels": ids[:, :5].contiguous()}
    elif name == "whisper":
        config = t.WhisperConfig(
            num_mel_bins=8,
            max_source_positions=8,
            max_target_positions=16,
            **{k: v for k, v in _SEQ2SEQ.items() if k != "max_position_embeddings"},
        )
        model = t.WhisperForConditionalGeneration(config)
        # two convolutions, the second of stride 2: 16 frames become 8 source positions
        inputs = {"input_features": torch.randn(2, 8, 16), "labels": ids[:, :5].contiguous()}
    elif name == "bloom":
        config = t.BloomConfig(
            hidden_size=32,
            n_layer=2,
            n_head=4,
            vocab_size=99,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        )
        model, inputs = t.BloomForCausalLM(config), {"input_ids": ids, "labels": ids}
    elif name == "gemma2":
        config = t.Gemma2Config(head_dim=8, sliding_window=4, **_DECODER)
        model, inputs = t.Gemma2ForCausalLM(config), {"input_ids": ids, "labels": ids}
    elif name == "wav2vec2":
        config = t.Wav2Vec2Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            conv_dim=(16, 16),
            conv_stride=(5, 2),
            conv_kernel=(10, 3),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
            vocab_size=12,
            hidden_dropout=0.0,
            activation_dropout=0.0,
            attention_dropout=0.0,
            feat_proj_dropout=0.0,
            final_dropout=0.0,
            layerdrop=0.0,
            mask_time_prob=0.0,
            mask_feature_prob=0.0,
            num_labels=3,
        )
        model = t.Wav2Vec2ForSequenceClassification(config)
        # 320 samples -> 31 frames after the two convolutions, mean-pooled for a 3-way label
        inputs = {
            "input_values": torch.randn(2, 320),
            "labels": torch.tensor([0, 2]),
        }
    elif name == "vit":
        config = t.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
            num_labels=3,
            # set up front: the loss would otherwise write it into the config on first use
            problem_type="single_label_classification",
            **_NO_BERT_DROPOUT,
        )
        model = t.ViTForImageClassification(config)
        inputs = {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.tensor([0, 2])}
    else:
        raise ValueError(f"no Hugging Face model named {name!r}")
    if name in (
        "gpt2",
        "llama",
        "mistral",
        "t5",
        "mt5",
        "bart",
        "marian",
        "pegasus",
        "whisper",
        "bloom",
        "gemma2",
    ):
        inputs["use_cache"] = False  # no key/value cache object: a plain training forward
    return model.to(device), {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()
    }


def tiny_llama_layers(
    n: int, tokens: int = 8
) -> tuple[list[nn.Module], torch.Tensor, dict[str, object]]:
    """``n`` transformers ``LlamaDecoderLayer`` s of one tiny config (hidden 64, 2 heads,
    intermediate 128; sdpa), in eval mode, seeded; a hidden state of batch 2 x ``tokens`` and
    the keyword arguments a layer takes (the rotary position embeddings)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=n,
        vocab_size=128,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    layers: list[nn.Module] = [LlamaDecoderLayer(config, i).eval() for i in range(n)]
    hidden = torch.randn(2, tokens, 64)
    positions = torch.arange(tokens)[None].expand(2, tokens)
    embeddings = LlamaRotaryEmbedding(config)(hidden, positions)
    return layers, hidden, {"position_embeddings": embeddings}


class KVCache(nn.Module):
    """Keys and values of every position so far, written in place (``index_copy_``)."""

    def __init__(self, heads: int, max_tokens: int, head_dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        shape = (1, heads, max_tokens, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype), persistent=False)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)
        return self.k_cache, self.v_cache


class DecoderBlock(nn.Module):
    """A Llama block that attends over a static key/value cache (the gpt-fast layout)."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.kv_cache: KVCache | None = None

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,
        input_pos: torch.Tensor,
    ) -> torch.Tensor:
        batch, tokens, dim = x.shape
        head_dim = dim // self.heads
        q, k, v = self.wqkv(self.attn_norm(x)).split(dim, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(input_pos, k, v)
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.wo(y.transpose(1, 2).reshape(batch, tokens, dim))
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    """A Llama-style decoder for token-by-token generation: ``forward(tokens, input_pos)``
    with static key/value caches (:meth:`setup_caches`), as in gpt-fast."""

    def __init__(
        self, vocab: int = 32000, dim: int = 1024, heads: int = 16, layers: int = 8
    ) -> None:
        super().__init__()
        hidden = 256 * ((int(8 * dim / 3) + 255) // 256)
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(DecoderBlock(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.max_tokens = 0

    def setup_caches(self, max_tokens: int) -> None:
        dim = self.head.in_features
        head_dim = dim // self.heads
        dtype, device = self.head.weight.dtype, self.head.weight.device
        for block in self.blocks:
            block.kv_cache = KVCache(self.heads, max_tokens, head_dim, dtype).to(device)
        half = head_dim // 2
        inverse = 1.0 / (10000.0 ** (torch.arange(half, device=device) / half))
        angles = torch.outer(torch.arange(max_tokens, device=device), inverse)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)
        causal = torch.ones(max_tokens, max_tokens, dtype=torch.bool, device=device).tril()
        self.register_buffer("causal", causal, persistent=False)
        self.max_tokens = max_tokens

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        mask = self.causal[None, None, input_pos]
        cos, sin = self.cos[input_pos], self.sin[input_pos]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, mask, input_pos)
        return self.head(self.norm(x))


def decode_one_token(model: Decoder, token: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
    """The next token (greedy) after ``token`` at ``input_pos``: gpt-fast's decode step."""
    logits = model(token, input_pos)
    return logits[:, -1].argmax(dim=-1, keepdim=True)
