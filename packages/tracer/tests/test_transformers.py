"""Hugging Face ``transformers`` models from tiny configs (no weights): one graph each,
outputs equal to eager. Skipped where ``transformers`` is not installed."""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer

transformers = pytest.importorskip("transformers")


def _tiny(name):
    t = transformers
    if name == "gpt2":
        cfg = t.GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=32,
            vocab_size=99,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,
        )
        return t.GPT2LMHeadModel(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "bert":
        cfg = t.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=99,
            max_position_embeddings=64,
        )
        ids = torch.randint(0, 99, (2, 8))
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 6:] = 0
        return t.BertModel(cfg), {"input_ids": ids, "attention_mask": mask}
    if name == "llama":
        cfg = t.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
            vocab_size=99,
            max_position_embeddings=64,
        )
        return t.LlamaForCausalLM(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "t5":
        cfg = t.T5Config(
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            vocab_size=99,
            decoder_start_token_id=0,
        )
        return t.T5Model(cfg), {
            "input_ids": torch.randint(0, 99, (2, 8)),
            "decoder_input_ids": torch.randint(0, 99, (2, 5)),
        }
    if name == "vit":
        cfg = t.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
        return t.ViTModel(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}
    causal = {
        "mistral": ("MistralForCausalLM", "MistralConfig", {"sliding_window": 4}),
        "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {}),
        "gemma": ("GemmaForCausalLM", "GemmaConfig", {"head_dim": 8}),
        "phi": ("PhiForCausalLM", "PhiConfig", {}),
    }
    if name in causal:
        model_cls, config_cls, extra = causal[name]
        cfg = getattr(t, config_cls)(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
            vocab_size=99,
            max_position_embeddings=64,
            **extra,
        )
        return getattr(t, model_cls)(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "opt":
        cfg = t.OPTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            vocab_size=99,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
        )
        return t.OPTForCausalLM(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    if name == "roberta":
        cfg = t.RobertaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=99,
            max_position_embeddings=64,
        )
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0
        return t.RobertaModel(cfg), {
            "input_ids": torch.randint(3, 99, (2, 8)),
            "attention_mask": mask,
        }
    if name == "distilbert":
        cfg = t.DistilBertConfig(
            dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=99, max_position_embeddings=64
        )
        return t.DistilBertModel(cfg), {"input_ids": torch.randint(0, 99, (2, 8))}
    raise AssertionError(name)


def _flat(out):
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    leaves = []
    for item in out:
        cache_layers = getattr(item, "layers", None)  # a DynamicCache: compare its tensors
        if cache_layers is not None:
            leaves += [t for layer in cache_layers for t in (layer.keys, layer.values)]
        elif isinstance(item, torch.Tensor):
            leaves.append(item)
        else:
            leaves += [
                t for t in torch.utils._pytree.tree_leaves(item) if isinstance(t, torch.Tensor)
            ]
    return leaves


@pytest.mark.parametrize(
    "name,use_cache",
    [
        ("gpt2", False),
        ("gpt2", True),
        ("bert", None),
        ("llama", False),
        ("llama", True),
        ("t5", False),
        ("vit", None),
        ("mistral", True),
        ("qwen2", True),
        ("gemma", True),
        ("phi", True),
        ("opt", True),
        ("roberta", None),
        ("distilbert", None),
    ],
)
def test_tiny_transformers_model_is_one_graph_equal_to_eager(name, use_cache, backend):
    torch.manual_seed(0)
    model, inputs = _tiny(name)
    model.eval()
    kwargs = dict(inputs) if use_cache is None else dict(inputs, use_cache=use_cache)
    with torch.no_grad():
        expected = model(**kwargs)
        compiled = sapwood_tracer.compile(model, backend=backend)
        for _ in range(2):
            actual = compiled(**kwargs)
            assert type(actual) is type(expected)
            got, want = _flat(actual), _flat(expected)
            assert len(got) == len(want)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
    assert backend.count == 1


def _training_case(name):
    t = transformers
    if name == "gpt2":
        model, inputs = _tiny("gpt2")
        return model, {
            "input_ids": inputs["input_ids"],
            "labels": inputs["input_ids"],
            "use_cache": False,
        }
    if name == "llama":
        model, inputs = _tiny("llama")
        return model, {
            "input_ids": inputs["input_ids"],
            "labels": inputs["input_ids"],
            "use_cache": False,
        }
    if name == "bert":
        cfg = t.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=99,
            max_position_embeddings=64,
            num_labels=3,
        )
        return t.BertForSequenceClassification(cfg), {
            "input_ids": torch.randint(0, 99, (2, 8)),
            "labels": torch.tensor([0, 2]),
        }
    cfg = t.T5Config(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        vocab_size=99,
        decoder_start_token_id=0,
    )
    inputs = {
        "input_ids": torch.randint(0, 99, (2, 8)),
        "labels": torch.randint(0, 99, (2, 5)),
        "use_cache": False,
    }
    return t.T5ForConditionalGeneration(cfg), inputs


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5"])
def test_tiny_model_training_step_matches_eager(name, backend):
    torch.manual_seed(0)
    model, inputs = _training_case(name)
    model.train()
    torch.manual_seed(1)
    expected = model(**inputs)
    expected.loss.backward()
    want = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = sapwood_tracer.compile(model, backend=backend)
    torch.manual_seed(1)
    actual = compiled(**inputs)
    actual.loss.backward()
    torch.testing.assert_close(actual.loss, expected.loss)
    for p, g in zip(model.parameters(), want):
        if g is None:
            assert p.grad is None
        else:
            torch.testing.assert_close(p.grad, g)
    assert backend.count == 1
