"""Real model code: a handwritten MLP, CNN and GPT block stack, each one graph equal to eager."""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn

import sapwood_tracer


class MLP(nn.Module):
    def __init__(self, sizes=(16, 32, 32, 8), dropout=0.1):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.norm = nn.LayerNorm(sizes[-1])
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        *hidden, last = self.layers
        for layer in hidden:
            x = self.drop(F.silu(layer(x)))
        return self.norm(last(x))


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.head = nn.Linear(16, classes)

    def forward(self, images):
        feats = self.features(images)
        return self.head(torch.flatten(feats, 1))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, block):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, block):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.ModuleDict(dict(fc=nn.Linear(dim, 4 * dim), proj=nn.Linear(4 * dim, dim)))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        m = self.mlp
        return x + m["proj"](F.gelu(m["fc"](self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50, dim=32, heads=4, layers=3, block=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx, targets=None):
        _, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        x = self.blocks(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def _same_as_eager(model, backend, *inputs, train=False):
    model.train(train)
    torch.manual_seed(0)
    expected = model(*inputs)
    compiled = sapwood_tracer.compile(model, backend=backend)
    for _ in range(2):
        torch.manual_seed(0)
        actual = compiled(*inputs)
        torch.testing.assert_close(actual, expected)
    assert backend.count == 1
    return actual


def test_mlp_eval(backend):
    _same_as_eager(MLP(), backend, torch.randn(4, 16))


def test_mlp_train_with_dropout_matches_under_same_seed(backend):
    _same_as_eager(MLP(), backend, torch.randn(4, 16), train=True)


def test_cnn_eval(backend):
    _same_as_eager(CNN(), backend, torch.randn(2, 3, 16, 16))


def test_gpt_block_stack_with_loss(backend):
    idx = torch.randint(0, 50, (2, 12))
    targets = torch.randint(0, 50, (2, 12))
    _same_as_eager(GPT(), backend, idx, targets)


def test_gpt_training_step_gradients_match(backend):
    torch.manual_seed(0)
    ref = GPT()
    model = GPT()
    model.load_state_dict(ref.state_dict())
    idx = torch.randint(0, 50, (2, 8))
    targets = torch.randint(0, 50, (2, 8))
    compiled = sapwood_tracer.compile(model, backend=backend)
    _, loss = compiled(idx, targets)
    loss.backward()
    _, ref_loss = ref(idx, targets)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_library_layers_lstm_gru_attention_encoder(backend):
    torch.manual_seed(0)
    cases = [
        (nn.LSTM(4, 8, batch_first=True), (torch.randn(2, 5, 4),)),
        (nn.GRU(4, 8), (torch.randn(5, 2, 4),)),
        (nn.MultiheadAttention(8, 2, batch_first=True), (torch.randn(2, 5, 8),) * 3),
        (nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), (torch.randn(2, 5, 8),)),
    ]
    for model, inputs in cases:
        model.eval()
        compiled = sapwood_tracer.compile(model, backend=backend)
        with torch.no_grad():
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
    assert backend.count == len(cases)
