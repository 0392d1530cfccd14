"""Make the committed test fixtures (deterministic; run with Debian's /usr/bin/python3).

  /usr/bin/python3 tools/make_fixtures.py [--repo ROOT]

Writes
  tests/fixtures/gptpy/    vocab.txt eval.txt model.pt model_orig_mod.pt model_bf16.pt
                           model.safetensors expected.json expected_bf16.json
  tests/fixtures/nanogpt/  vocab.txt meta.pkl eval.txt ckpt.pt ckpt_module.pt expected.json
  tests/fixtures/real_nanogpt.json   (from /work/shared/data/real-nanogpt, if present)

expected*.json:
  {"arch": "gptpy"|"nanogpt",
   "config": {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"[, "bias"]},
   "ids": [block_size ids],
   "logits": [block_size * vocab_size floats, row-major [T, V], all positions, f32 eval mode],
   "greedy": {"prompt": [0], "new_tokens": N, "ids": [prompt + N generated ids]},
   "eval": {"text": "eval.txt", "loss_all", "tokens_all", "loss_val", "tokens_val"}}
Greedy decoding is the lecture's generate with argmax (crop to the last block_size tokens, first
maximal index). "all" scores every id of eval.txt with window_loss; "val" scores
ids[int(0.9 * len(ids)):] (the lecture's split).
"""
import argparse
import copy
import json
import os
import pickle
import random
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptpy_model import GPTLanguageModel, window_loss  # noqa: E402
from nanogpt_model import GPT, GPTConfig, load_nanogpt  # noqa: E402

GPTPY_TEXT = """\
The quick brown fox jumps over the lazy dog, and then it sleeps.
A café on the corner sold bread; we paid with coins.
Why would anyone leave? Nobody knew, yet everyone went.
"""

NANOGPT_TEXT = """\
First Citizen: Before we proceed any further, hear me speak.
All: Speak, speak! Résumé of the day? None, sir.
You are all resolved rather to die than to famish?
"""

PERTURB_STD = 0.2
REAL_DIR = '/work/shared/data/real-nanogpt'
REAL_REL = '../shared/data/real-nanogpt'  # relative to the repository root


def perturb(model, seed, std=PERTURB_STD):
    """Add N(0, std) noise to every parameter (LayerNorm weights and biases included) so that
    the random model's logits vary and greedy decoding does not collapse to one token."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():  # tied weights appear once
            p.add_(torch.randn(p.shape, generator=g) * std)


def make_eval_text(text, seed, n_chars=3000):
    """A few KB of lines made of the vocabulary text's words, shuffled (chars from the vocab)."""
    rng = random.Random(seed)
    words = text.split()
    lines, size = [], 0
    while size < n_chars:
        line = ' '.join(rng.choice(words) for _ in range(rng.randint(4, 11)))
        lines.append(line)
        size += len(line) + 1
    return '\n'.join(lines) + '\n'


def as_logits_fn(model, arch):
    """A callable returning (logits, None) as window_loss expects, for either architecture."""
    if arch == 'gptpy':
        return model
    return lambda x: (model(x), None)


def forward_logits(model, arch, ids):
    """Logits [T, V] of one sequence."""
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long))
    return (out[0] if arch == 'gptpy' else out)[0]


def greedy(model, arch, block_size, prompt, new_tokens):
    idx = list(prompt)
    for _ in range(new_tokens):
        logits = forward_logits(model, arch, idx[-block_size:])[-1]
        idx.append(int(np.argmax(logits.numpy())))  # first maximal index
    return idx


def greedy_shift(model, block_size, prompt, new_tokens):
    """ember's `shift` policy as plain PyTorch: when the context is full, keep its newest half
    (recomputed at positions 0..k-1, which a full forward of the kept tokens is), then append."""
    seq, ctx = list(prompt), list(prompt)
    for _ in range(new_tokens):
        logits = forward_logits(model, 'gptpy', ctx)[-1]
        nxt = int(np.argmax(logits.numpy()))
        seq.append(nxt)
        if len(ctx) == block_size:
            ctx = ctx[-(block_size // 2):]
        ctx.append(nxt)
    return seq


@torch.no_grad()
def greedy_ring(model, block_size, prompt, new_tokens):
    """ember's `ring` policy as plain PyTorch on the lecture model's modules: a KV cache of
    block_size slots; token t goes to slot t % block_size at position min(t, block_size - 1)
    and attends to every filled slot, whose K/V stay as computed when they were written."""
    n_layer = len(model.blocks)
    C = model.token_embedding_table.weight.shape[1]
    kc = torch.zeros(n_layer, block_size, C)
    vc = torch.zeros(n_layer, block_size, C)
    seq = list(prompt)

    def step(t):
        tok = seq[t]
        x = model.token_embedding_table.weight[tok] + model.position_embedding_table.weight[min(t, block_size - 1)]
        slot = t % block_size
        n_valid = min(t + 1, block_size)
        for l, blk in enumerate(model.blocks):
            h = blk.ln1(x)
            heads = blk.sa.heads
            hs = C // len(heads)
            kc[l, slot] = torch.cat([hd.key(h) for hd in heads])
            vc[l, slot] = torch.cat([hd.value(h) for hd in heads])
            q = torch.cat([hd.query(h) for hd in heads])
            outs = []
            for i in range(len(heads)):
                K = kc[l, :n_valid, i * hs:(i + 1) * hs]
                V = vc[l, :n_valid, i * hs:(i + 1) * hs]
                w = torch.softmax(K @ q[i * hs:(i + 1) * hs] * hs ** -0.5, dim=0)
                outs.append(w @ V)
            x = x + blk.sa.proj(torch.cat(outs))
            x = x + blk.ffwd(blk.ln2(x))
        return model.lm_head(model.ln_f(x))

    for t in range(len(prompt) - 1):
        step(t)
    for _ in range(new_tokens):
        logits = step(len(seq) - 1)
        seq.append(int(np.argmax(logits.numpy())))
    return seq


def expected(model, arch, config, ids, eval_ids=None, new_tokens=None):
    model.eval()
    bs = config['block_size']
    logits = forward_logits(model, arch, ids)
    assert logits.shape == (len(ids), config['vocab_size'])
    new_tokens = new_tokens if new_tokens is not None else 3 * bs
    out = {
        'arch': arch,
        'config': config,
        'ids': list(ids),
        'logits': [float(v) for v in logits.reshape(-1).tolist()],
        'greedy': {'prompt': [0], 'new_tokens': new_tokens,
                   'ids': greedy(model, arch, bs, [0], new_tokens)},
    }
    if eval_ids is not None:
        t = torch.tensor(eval_ids, dtype=torch.long)
        fn = as_logits_fn(model, arch)
        la, na = window_loss(fn, t, bs)
        n = int(0.9 * len(t))
        lv, nv = window_loss(fn, t[n:], bs)
        out['eval'] = {'text': 'eval.txt', 'loss_all': la, 'tokens_all': na,
                       'loss_val': lv, 'tokens_val': nv}
    return out


def write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f, indent=1)
        f.write('\n')


def write_text(path, text):
    with open(path, 'w', encoding='utf-8', newline='\n') as f:
        f.write(text)


def write_safetensors(path, state_dict):
    """The safetensors format by hand: u64 LE header length, JSON header, raw LE bytes."""
    header, blobs, offset = {'__metadata__': {'format': 'pt'}}, [], 0
    for name in sorted(state_dict):
        t = state_dict[name].detach().contiguous()
        assert t.dtype == torch.float32
        data = t.numpy().astype('<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(t.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * (-len(h) % 8)  # pad so the data starts 8-byte aligned, as safetensors does
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def summarize(tag, exp):
    lg = np.array(exp['logits'])
    g = exp['greedy']['ids']
    s = f"{tag}: logits min {lg.min():.2f} max {lg.max():.2f} std {lg.std():.2f}; " \
        f"greedy {len(g)} ids, {len(set(g))} distinct"
    if 'eval' in exp:
        e = exp['eval']
        s += f"; eval all {e['loss_all']:.4f}/{e['tokens_all']} val {e['loss_val']:.4f}/{e['tokens_val']}"
    print(s)


def make_gptpy(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    text = GPTPY_TEXT
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    V = len(chars)
    cfg = dict(n_layer=2, n_head=4, n_embd=32, block_size=16, vocab_size=V)
    torch.manual_seed(1337)
    model = GPTLanguageModel(V, cfg['n_embd'], cfg['n_head'], cfg['n_layer'], cfg['block_size'])
    perturb(model, 1)
    model.eval()
    eval_text = make_eval_text(text, 2)
    write_text(os.path.join(out_dir, 'vocab.txt'), text)
    write_text(os.path.join(out_dir, 'eval.txt'), eval_text)
    eval_ids = [stoi[c] for c in eval_text]
    ids = torch.randint(0, V, (cfg['block_size'],), generator=torch.Generator().manual_seed(3)).tolist()

    sd = model.state_dict()
    torch.save(sd, os.path.join(out_dir, 'model.pt'))
    torch.save({'_orig_mod.' + k: v for k, v in sd.items()}, os.path.join(out_dir, 'model_orig_mod.pt'))
    write_safetensors(os.path.join(out_dir, 'model.safetensors'),
                      {k: v for k, v in sd.items() if not k.endswith('.tril')})
    exp = expected(model, 'gptpy', cfg, ids, eval_ids)
    # The other two context policies, past block_size, computed by PyTorch.
    n_new = exp['greedy']['new_tokens']
    exp['greedy_shift'] = greedy_shift(model, cfg['block_size'], [0], n_new)
    exp['greedy_ring'] = greedy_ring(model, cfg['block_size'], [0], n_new)
    assert exp['greedy_shift'][:cfg['block_size'] + 1] == exp['greedy']['ids'][:cfg['block_size'] + 1]
    assert exp['greedy_ring'][:cfg['block_size'] + 1] == exp['greedy']['ids'][:cfg['block_size'] + 1]
    write_json(os.path.join(out_dir, 'expected.json'), exp)
    summarize('gptpy', exp)

    # bf16 variant: one 2-D weight stored as bfloat16; expected values use the rounded weight.
    bf_key = 'blocks.0.ffwd.net.0.weight'
    sd_bf = copy.copy(sd)
    sd_bf[bf_key] = sd[bf_key].to(torch.bfloat16)
    torch.save(sd_bf, os.path.join(out_dir, 'model_bf16.pt'))
    model_bf = copy.deepcopy(model)
    with torch.no_grad():
        model_bf.blocks[0].ffwd.net[0].weight.copy_(sd_bf[bf_key].float())
    exp_bf = expected(model_bf, 'gptpy', cfg, ids, eval_ids)
    exp_bf['bf16_tensors'] = [bf_key]
    write_json(os.path.join(out_dir, 'expected_bf16.json'), exp_bf)
    summarize('gptpy bf16', exp_bf)


def make_nanogpt(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    text = NANOGPT_TEXT
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = {i: c for i, c in enumerate(chars)}
    V = len(chars)
    cfg = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=V, bias=True)
    torch.manual_seed(4242)
    model = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32,
                          dropout=0.0, bias=True))
    perturb(model, 5)
    model.eval()
    eval_text = make_eval_text(text, 6)
    write_text(os.path.join(out_dir, 'vocab.txt'), text)
    write_text(os.path.join(out_dir, 'eval.txt'), eval_text)
    with open(os.path.join(out_dir, 'meta.pkl'), 'wb') as f:
        pickle.dump({'vocab_size': V, 'itos': itos, 'stoi': stoi}, f, protocol=4)
    eval_ids = [stoi[c] for c in eval_text]
    ids = torch.randint(0, V, (16,), generator=torch.Generator().manual_seed(7)).tolist()

    # an AdamW state after one step, taken on a copy so the saved weights are the model's
    trained = copy.deepcopy(model)
    trained.train()
    params = [p for p in trained.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1},
                             {'params': nodecay, 'weight_decay': 0.0}], lr=6e-4, betas=(0.9, 0.95))
    x = torch.tensor([eval_ids[:16]])
    y = torch.tensor([eval_ids[1:17]])
    loss = torch.nn.functional.cross_entropy(trained(x).view(-1, V), y.view(-1))
    loss.backward()
    opt.step()

    model_args = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, bias=True, vocab_size=V, dropout=0.0)
    config = {'out_dir': 'out-fixture', 'eval_interval': 250, 'dataset': 'fixture_char',
              'learning_rate': 6e-4, 'weight_decay': 0.1, 'beta1': 0.9, 'beta2': 0.95,
              'dtype': 'float32', 'device': 'cpu', 'compile': False, 'init_from': 'scratch'}
    sd = model.state_dict()
    ckpt = {'model': sd, 'optimizer': opt.state_dict(), 'model_args': model_args,
            'iter_num': 0, 'best_val_loss': torch.tensor(9.9), 'config': config}
    torch.save(ckpt, os.path.join(out_dir, 'ckpt.pt'))
    # `module.` prefixed keys (a DDP-wrapped save); optimizer left out to keep the fixture small
    ckpt_mod = {'model': {'module.' + k: v for k, v in sd.items()}, 'model_args': model_args,
                'iter_num': 0, 'best_val_loss': torch.tensor(9.9), 'config': config}
    torch.save(ckpt_mod, os.path.join(out_dir, 'ckpt_module.pt'))

    # the saved checkpoint must load back to the same network
    reloaded, _ = load_nanogpt(os.path.join(out_dir, 'ckpt.pt'))
    reloaded_m, _ = load_nanogpt(os.path.join(out_dir, 'ckpt_module.pt'))
    exp = expected(model, 'nanogpt', cfg, ids, eval_ids)
    for m in (reloaded, reloaded_m):
        assert expected(m, 'nanogpt', cfg, ids)['logits'] == exp['logits']
    write_json(os.path.join(out_dir, 'expected.json'), exp)
    summarize('nanogpt', exp)


def make_real(out_path):
    ckpt_path = os.path.join(REAL_DIR, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        print(f"skip real_nanogpt.json: {ckpt_path} not found")
        return
    model, ckpt = load_nanogpt(ckpt_path)
    with open(os.path.join(REAL_DIR, 'meta.pkl'), 'rb') as f:
        meta = pickle.load(f)
    stoi = meta['stoi']
    with open(os.path.join(REAL_DIR, 'input.txt'), encoding='utf-8') as f:
        text = f.read(4096)
    ids = [stoi[c] for c in text if c in stoi][:64]
    a = ckpt['model_args']
    cfg = dict(n_layer=a['n_layer'], n_head=a['n_head'], n_embd=a['n_embd'],
               block_size=a['block_size'], vocab_size=a['vocab_size'], bias=bool(a['bias']))
    assert len(ids) == cfg['block_size'] == 64
    exp = expected(model, 'nanogpt', cfg, ids, new_tokens=100)
    exp = {'checkpoint': f'{REAL_REL}/ckpt.pt', 'meta': f'{REAL_REL}/meta.pkl',
           'text': f'{REAL_REL}/input.txt', **exp}
    write_json(out_path, exp)
    summarize('real nanogpt', exp)
    print('  greedy text:', repr(''.join(meta['itos'][i] for i in exp['greedy']['ids'])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--repo', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    torch.set_num_threads(1)
    fx = os.path.join(args.repo, 'tests', 'fixtures')
    make_gptpy(os.path.join(fx, 'gptpy'))
    make_nanogpt(os.path.join(fx, 'nanogpt'))
    make_real(os.path.join(fx, 'real_nanogpt.json'))
    total = 0
    for root, _, files in os.walk(fx):
        for name in sorted(files):
            p = os.path.join(root, name)
            if 'gptpy' in p or 'nanogpt' in p:
                total += os.path.getsize(p)
                print(f"  {os.path.relpath(p, args.repo):45s} {os.path.getsize(p):8d} B")
    print(f"total {total} B")


if __name__ == '__main__':
    main()
