"""Make the committed GPT-2 model fixtures (deterministic; run with Debian's /usr/bin/python3).

  /usr/bin/python3 tools/make_gpt2_fixtures.py [--repo ROOT]

A GPT-2-shaped model in plain torch with Hugging Face's parameter names and layouts
(transformers' GPT2LMHeadModel: Conv1D weights stored [in, out], tanh GELU "gelu_new", the
`attn.bias` bool mask and `attn.masked_bias` buffers, lm_head tied to wte), random weights,
tiny sizes (n_embd 32, so attn.c_proj is square as in every GPT-2). The vocabulary is a tiny
byte-level BPE (GPT-2's 256 bytes, its first 40 merges and <|endoftext|>: 297 tokens), the
embedding padded to 320 rows as nanoGPT pads 50257 to 50304.

Writes tests/fixtures/gpt2/
  tiny_tokenizer/encoder.json, vocab.bpe   the first 40 merges of tokenizer/ (GPT-2's files)
  hf/config.json                           Hugging Face configuration (activation gelu_new)
  hf/pytorch_model.bin                     torch.save(state_dict): "transformer." keys, lm_head
                                           sharing wte's storage, bool attn.bias buffers
  hf/model.safetensors                     keys without "transformer.", no lm_head (tied),
                                           BOOL attn.bias and F32 attn.masked_bias buffers
  hf_legacy/pytorch_model.bin, config.json torch.save's legacy (pre-1.6) format of the same
                                           state_dict, as older Hugging Face uploads are
  nanogpt/ckpt.pt                          the same weights in nanoGPT's layout (nn.Linear
                                           [out, in]) with model_args
  expected.json                            {"config", "tokenizer_size", "ids" [T],
      "logits_hf" [T * V] (tanh GELU, as transformers computes GPT-2),
      "logits_nanogpt" [T * V] (the same weights, exact erf GELU, as nanoGPT computes them),
      "greedy_hf": {"prompt", "ids"}: greedy over the real rows only (padding never chosen),
      exact context policy (crop to block_size)}
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT, GPTConfig  # noqa: E402

N_LAYER, N_HEAD, N_EMBD, N_POSITIONS = 2, 4, 32, 16
N_MERGES = 40
TOKENIZER_SIZE = 256 + N_MERGES + 1
VOCAB = 320  # padded
EPS = 1e-5


def gelu_new(x):
    """transformers' NewGELUActivation (the tanh approximation GPT-2 was trained with)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):
    """transformers' Conv1D: a linear layer whose weight is stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class HFAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((N_POSITIONS, N_POSITIONS), dtype=torch.bool))
                             .view(1, 1, N_POSITIONS, N_POSITIONS))
        self.register_buffer("masked_bias", torch.tensor(-1e4))
        self.c_attn = Conv1D(3 * N_EMBD, N_EMBD)
        self.c_proj = Conv1D(N_EMBD, N_EMBD)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // N_HEAD
        q, k, v = (t.view(B, T, N_HEAD, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        att = torch.where(self.bias[:, :, :T, :T], att, torch.tensor(torch.finfo(att.dtype).min))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class HFMLP(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.c_fc = Conv1D(4 * N_EMBD, N_EMBD)
        self.c_proj = Conv1D(N_EMBD, 4 * N_EMBD)
        self.act = act

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class HFBlock(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD, eps=EPS)
        self.attn = HFAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD, eps=EPS)
        self.mlp = HFMLP(act)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class HFGPT2(nn.Module):
    """GPT2LMHeadModel's parameter names and math."""

    def __init__(self, act=gelu_new):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, N_EMBD),
            wpe=nn.Embedding(N_POSITIONS, N_EMBD),
            h=nn.ModuleList([HFBlock(act) for _ in range(N_LAYER)]),
            ln_f=nn.LayerNorm(N_EMBD, eps=EPS),
        ))
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, idx):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for b in self.transformer.h:
            x = b(x)
        return self.lm_head(self.transformer.ln_f(x))


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            base = 1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0
            p.copy_(base + 0.2 * torch.randn(p.shape, generator=g))


def write_safetensors(path, tensors):
    """The safetensors format by hand (F32 and BOOL): u64 LE header length, JSON header, bytes."""
    header, blobs, offset = {'__metadata__': {'format': 'pt'}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        if t.dtype == torch.bool:
            data, dt = t.numpy().astype('u1').tobytes(), 'BOOL'
        else:
            data, dt = t.numpy().astype('<f4').tobytes(), 'F32'
        header[name] = {'dtype': dt, 'shape': list(t.shape), 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def greedy_real_rows(model, prompt, new_tokens):
    """generate with argmax over the first TOKENIZER_SIZE logits, cropping to block_size."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            x = torch.tensor([ids[-N_POSITIONS:]])
            logits = model(x)[0, -1, :TOKENIZER_SIZE]
            ids.append(int(torch.argmax(logits)))
    return ids


def make_tiny_tokenizer(tok_dir, out_dir):
    with open(os.path.join(tok_dir, 'encoder.json'), encoding='utf-8') as f:
        enc = json.load(f)
    with open(os.path.join(tok_dir, 'vocab.bpe'), encoding='utf-8') as f:
        lines = f.read().split('\n')
    merges = [l for l in lines[1:] if l][:N_MERGES]
    inv = {v: k for k, v in enc.items()}
    tiny = {inv[i]: i for i in range(256)}
    for r, m in enumerate(merges):
        a, b = m.split(' ')
        assert enc[a + b] == 256 + r  # GPT-2: the token of merge r is id 256 + r
        tiny[a + b] = 256 + r
    tiny['<|endoftext|>'] = 256 + N_MERGES
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, 'encoder.json'), 'w', encoding='utf-8') as f:
        json.dump(tiny, f, ensure_ascii=False)
    with open(os.path.join(out_dir, 'vocab.bpe'), 'w', encoding='utf-8', newline='\n') as f:
        f.write(lines[0] + '\n' + '\n'.join(merges) + '\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repo', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    args = ap.parse_args()
    torch.manual_seed(0)
    root = os.path.join(args.repo, 'tests', 'fixtures', 'gpt2')
    make_tiny_tokenizer(os.path.join(root, 'tokenizer'), os.path.join(root, 'tiny_tokenizer'))

    hf = HFGPT2().eval()
    randomize(hf, 1234)
    sd = hf.state_dict()
    os.makedirs(os.path.join(root, 'hf'), exist_ok=True)
    with open(os.path.join(root, 'hf', 'config.json'), 'w') as f:
        json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
                   "n_layer": N_LAYER, "n_head": N_HEAD, "n_embd": N_EMBD, "n_positions": N_POSITIONS, "n_ctx": N_POSITIONS,
                   "vocab_size": VOCAB, "layer_norm_epsilon": EPS, "n_inner": None, "scale_attn_weights": True,
                   "tie_word_embeddings": True}, f, indent=2)
    torch.save(sd, os.path.join(root, 'hf', 'pytorch_model.bin'))
    os.makedirs(os.path.join(root, 'hf_legacy'), exist_ok=True)
    torch.save(sd, os.path.join(root, 'hf_legacy', 'pytorch_model.bin'), _use_new_zipfile_serialization=False)
    with open(os.path.join(root, 'hf', 'config.json')) as src, open(os.path.join(root, 'hf_legacy', 'config.json'), 'w') as dst:
        dst.write(src.read())
    bare = {k[len('transformer.'):]: v for k, v in sd.items() if k.startswith('transformer.')}  # GPT2Model's names
    write_safetensors(os.path.join(root, 'hf', 'model.safetensors'), bare)

    # The same weights in nanoGPT's layout: nn.Linear [out, in] = Conv1D weight transposed.
    cfg = GPTConfig(block_size=N_POSITIONS, vocab_size=VOCAB, n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD,
                    dropout=0.0, bias=True)
    nano = GPT(cfg).eval()
    nsd = nano.state_dict()
    conv = ('attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight')
    with torch.no_grad():
        for k in nsd:
            if k.endswith('attn.bias') and 'c_attn' not in k and 'c_proj' not in k:
                continue  # nanoGPT's own float mask buffer
            src = sd[k]
            nsd[k].copy_(src.t() if k.endswith(conv) else src)
    nano.load_state_dict(nsd)
    os.makedirs(os.path.join(root, 'nanogpt'), exist_ok=True)
    torch.save({'model': nano.state_dict(),
                'model_args': dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, block_size=N_POSITIONS, bias=True,
                                   vocab_size=VOCAB, dropout=0.0),
                'iter_num': 0, 'best_val_loss': 1e9, 'config': {}},
               os.path.join(root, 'nanogpt', 'ckpt.pt'))

    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, TOKENIZER_SIZE, (1, N_POSITIONS), generator=g)
    with torch.no_grad():
        logits_hf = hf(ids)[0]
        logits_nano = nano(ids)[0]
        hf_erf = HFGPT2(act=F.gelu).eval()
        hf_erf.load_state_dict(sd)
        # The HF-layout model with exact GELU is nanoGPT's model: the layouts agree.
        assert torch.allclose(hf_erf(ids)[0], logits_nano, atol=1e-5), "HF and nanoGPT layouts disagree"
        assert not torch.allclose(logits_hf, logits_nano, atol=1e-4), "tanh and erf GELU should differ visibly"
    prompt = [int(i) for i in ids[0, :3]]
    greedy = greedy_real_rows(hf, prompt, 2 * N_POSITIONS)
    exp = {'config': dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, block_size=N_POSITIONS, vocab_size=VOCAB),
           'tokenizer_size': TOKENIZER_SIZE,
           'ids': [int(i) for i in ids[0]],
           'logits_hf': [round(float(v), 7) for v in logits_hf.flatten()],
           'logits_nanogpt': [round(float(v), 7) for v in logits_nano.flatten()],
           'greedy_hf': {'prompt': prompt, 'ids': greedy}}
    with open(os.path.join(root, 'expected.json'), 'w') as f:
        json.dump(exp, f, separators=(',', ':'))
    print('tanh vs erf max |diff| %.3g; greedy %s' % (float((logits_hf - logits_nano).abs().max()), greedy))
    for dirpath, _, files in os.walk(root):
        for fn in sorted(files):
            print('%8d %s' % (os.path.getsize(os.path.join(dirpath, fn)), os.path.join(dirpath, fn)))


if __name__ == '__main__':
    main()
