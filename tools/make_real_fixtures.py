"""Fixtures for checkpoints as users leave them (issue 14); run with Debian's /usr/bin/python3.

  /usr/bin/python3 tools/make_real_fixtures.py [--repo ROOT]

Writes tests/fixtures/real/:
  train.txt        the first 40,000 characters of tinyshakespeare (the training text)
  oldscale.pt      the lecture's gpt.py trained 300 steps with the early attention scale
                   C**-0.5, C = n_embd (not head_size): a state_dict
  renamed.pt       the same weights under renamed modules (layers.N.attn.heads.N.query,
                   norm1, mlp.layers.0, tok_emb, pos_emb)
  makemore.pt      makemore's Transformer: nanoGPT names, nn.Linear, tanh GELU (NewGELU),
                   untied lm_head without bias, attn.bias buffer, no model_args (random weights)
  whole_model.pt   torch.save(model) of a __main__ class
  expected.json    {"oldscale": {"config", "loss_val_embd", "loss_val_head", "tokens_val"},
                    "makemore": {"config", "ids", "logits" [T, V] row-major}}
Losses are window_loss (tools/gptpy_model.py, what `ember eval --split val` computes) over the
last 10% of train.txt's ids.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gptpy_model  # noqa: E402
from gptpy_model import GPTLanguageModel, window_loss  # noqa: E402

N_CHARS = 40000
SHAKESPEARE = '/work/shared/data/tinyshakespeare.txt'


def set_scale(model, embd):
    """Every Head of the gpt.py model scales by C**-0.5 (embd) or head_size**-0.5."""
    for m in model.modules():
        if isinstance(m, gptpy_model.Head):
            m.embd_scale = embd


def head_forward(self, x):
    """gpt.py's Head.forward with the scale chosen by self.embd_scale (the early lecture
    version multiplied by C**-0.5 with C = n_embd)."""
    B, T, C = x.shape
    k = self.key(x)
    q = self.query(x)
    scale = C ** -0.5 if getattr(self, 'embd_scale', False) else k.shape[-1] ** -0.5
    wei = q @ k.transpose(-2, -1) * scale
    wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
    wei = F.softmax(wei, dim=-1)
    return wei @ self.value(x)


gptpy_model.Head.forward = head_forward


def train_oldscale(text, steps=300, seed=1337):
    torch.manual_seed(seed)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    cfg = dict(vocab_size=len(chars), n_embd=64, n_head=4, n_layer=2, block_size=32)
    model = GPTLanguageModel(**cfg)
    set_scale(model, True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for it in range(steps):
        ix = torch.randint(len(train) - cfg['block_size'], (32,))
        x = torch.stack([train[i:i + cfg['block_size']] for i in ix])
        y = torch.stack([train[i + 1:i + cfg['block_size'] + 1] for i in ix])
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    loss_embd, tokens = window_loss(model, val, cfg['block_size'])
    set_scale(model, False)
    loss_head, _ = window_loss(model, val, cfg['block_size'])
    print(f'oldscale: train loss {loss.item():.4f}, val {loss_embd:.4f} (embd scale), {loss_head:.4f} (head scale)')
    return model, dict(config=cfg, loss_val_embd=loss_embd, loss_val_head=loss_head, tokens_val=tokens)


RENAMES = [('blocks.', 'layers.'), ('.sa.', '.attn.'), ('ln1', 'norm1'), ('ln2', 'norm2'),
           ('ffwd.net.', 'mlp.layers.'), ('token_embedding_table', 'tok_emb'),
           ('position_embedding_table', 'pos_emb')]


def renamed(sd):
    out = {}
    for k, v in sd.items():
        for a, b in RENAMES:
            k = k.replace(a, b)
        out[k] = v
    return out


class NewGELU(nn.Module):
    """makemore's (and GPT-2's) tanh GELU."""
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer('bias', torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MakemoreBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd), act=NewGELU()))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))


class MakemoreTransformer(nn.Module):
    """makemore.py's Transformer, as its module names."""
    def __init__(self, vocab_size, n_embd, n_head, n_layer, block_size):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([MakemoreBlock(n_embd, n_head, block_size) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t).unsqueeze(0))
        for b in self.transformer.h:
            x = b(x)
        return self.lm_head(self.transformer.ln_f(x))


def make_makemore(text, seed=7):
    torch.manual_seed(seed)
    chars = sorted(set(text))
    cfg = dict(vocab_size=len(chars), n_embd=48, n_head=3, n_layer=2, block_size=16)
    model = MakemoreTransformer(**cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.2)
    model.eval()
    stoi = {c: i for i, c in enumerate(chars)}
    ids = [stoi[c] for c in text[1000:1000 + cfg['block_size']]]
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    return model, dict(config=cfg, ids=ids, logits=[round(v, 6) for v in logits.flatten().tolist()])


class WholeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repo', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    torch.set_num_threads(2)
    out = os.path.join(args.repo, 'tests', 'fixtures', 'real')
    os.makedirs(out, exist_ok=True)
    with open(SHAKESPEARE, encoding='utf-8') as f:
        text = f.read()[:N_CHARS]
    with open(os.path.join(out, 'train.txt'), 'w', encoding='utf-8') as f:
        f.write(text)
    model, old = train_oldscale(text)
    sd = model.state_dict()
    torch.save(sd, os.path.join(out, 'oldscale.pt'))
    torch.save(renamed(sd), os.path.join(out, 'renamed.pt'))
    mm, mexp = make_makemore(text)
    torch.save(mm.state_dict(), os.path.join(out, 'makemore.pt'))
    torch.save(WholeModel(), os.path.join(out, 'whole_model.pt'))
    with open(os.path.join(out, 'expected.json'), 'w') as f:
        json.dump(dict(oldscale=old, makemore=mexp), f)


if __name__ == '__main__':
    main()
