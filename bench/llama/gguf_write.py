"""Write a GPT checkpoint as a GGUF file for llama.cpp's `gpt2` architecture (f16 or q8_0).

Sources (the same weights ember converts):
  - Hugging Face GPT-2: model.safetensors with config.json beside it (Conv1D weights [in, out]);
  - nanoGPT ckpt.pt ({'model_args', 'model'}, keys with or without `_orig_mod.`);
  - the lecture's gpt.py state_dict (per-head key/query/value [hs, C], no bias; ReLU; lm_head
    with its own weight and bias).

Format (GGUF version 3, little-endian; ggml's gguf.h and gguf-py's constants.py are the spec):
magic "GGUF", version u32, tensor count u64, KV count u64, the KVs (key string, type u32,
value), the tensor infos (name, n_dims u32, dims u64 innermost first, ggml type u32, offset u64
into the data section), padding to general.alignment (32), then each tensor's bytes, each
padded to 32. A PyTorch [out, in] matrix written row-major is ggml's {in, out}.

Types: matrices f16 or q8_0 (blocks of 32 along a row: an f16 scale d = max|x| / 127 and 32
int8 q = round(x / d), rounding half away from zero as ggml's quantize_row_q8_0_ref does);
vectors (biases, LayerNorm) f32.

What llama.cpp's gpt2 graph (src/models/gpt2.cpp) cannot express, and what this writer does:
  - fused qkv [3C, C] with a bias: gpt.py's per-head q/k/v are concatenated in head order (Q of
    heads 0..n_head-1, then K, then V) with zero biases;
  - attention scale 1/sqrt(head_size): gpt.py here scales by k.shape[-1] ** -0.5 = head_size as
    GPT-2 does, so nothing is folded (a 1/sqrt(n_embd) model would be given --fold-scale-embd,
    multiplying the query rows by sqrt(head_size / n_embd): exact, the map is linear);
  - GELU (tanh) is hard-wired: gpt.py's ReLU and nanoGPT's exact-erf GELU run as tanh GELU;
  - no lm_head bias: gpt.py's lm_head bias is dropped (printed). So a gpt.py model runs in
    llama.cpp at the same shapes and cost but not with the same logits; bench/llama/check.py
    compares it with PyTorch running the same weights with those two changes made.
Vocabulary: tokenizer.ggml.model = "none" plus gpt2.vocab_size: ids only, never tokenized.

  /usr/bin/python3 bench/llama/gguf_write.py SRC --type f16|q8_0 -o OUT.gguf [--n-head N]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

ALIGN = 32
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
FILE_TYPE = {'f16': 1, 'q8_0': 7}  # llama_ftype MOSTLY_F16, MOSTLY_Q8_0
KV_U32, KV_F32, KV_STRING = 4, 6, 8


def read_safetensors(path):
    """{name: float32 array} from a .safetensors file (F32, F16 or BF16 tensors)."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode='r')
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        a, b = info['data_offsets']
        buf = raw[base + a: base + b]
        if info['dtype'] == 'F32':
            t = buf.view('<f4')
        elif info['dtype'] == 'F16':
            t = buf.view('<f2').astype(np.float32)
        elif info['dtype'] == 'BF16':
            t = (buf.view('<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            continue  # bool / uint8 mask buffers
        out[name] = t.reshape(info['shape'])
    return out


def from_hf(path, n_head):
    """Canonical tensors from a Hugging Face GPT-2 folder's model.safetensors + config.json."""
    with open(os.path.join(os.path.dirname(path), 'config.json')) as f:
        cfg = json.load(f)
    sd = {k[len('transformer.'):] if k.startswith('transformer.') else k: v for k, v in read_safetensors(path).items()}
    L = cfg['n_layer']
    t = {'wte': sd['wte.weight'], 'wpe': sd['wpe.weight'], 'ln_f.w': sd['ln_f.weight'], 'ln_f.b': sd['ln_f.bias']}
    if 'lm_head.weight' in sd and not np.array_equal(sd['lm_head.weight'], sd['wte.weight']):
        t['lm_head'] = sd['lm_head.weight']
    for l in range(L):
        p = 'h.%d.' % l
        t.update({'%d.ln_1.w' % l: sd[p + 'ln_1.weight'], '%d.ln_1.b' % l: sd[p + 'ln_1.bias'],
                  '%d.qkv.w' % l: sd[p + 'attn.c_attn.weight'].T, '%d.qkv.b' % l: sd[p + 'attn.c_attn.bias'],
                  '%d.proj.w' % l: sd[p + 'attn.c_proj.weight'].T, '%d.proj.b' % l: sd[p + 'attn.c_proj.bias'],
                  '%d.ln_2.w' % l: sd[p + 'ln_2.weight'], '%d.ln_2.b' % l: sd[p + 'ln_2.bias'],
                  '%d.fc.w' % l: sd[p + 'mlp.c_fc.weight'].T, '%d.fc.b' % l: sd[p + 'mlp.c_fc.bias'],
                  '%d.fc2.w' % l: sd[p + 'mlp.c_proj.weight'].T, '%d.fc2.b' % l: sd[p + 'mlp.c_proj.bias']})
    return t, dict(n_layer=L, n_head=n_head or cfg['n_head'], eps=cfg.get('layer_norm_epsilon', 1e-5))


def from_torch(path, n_head):
    """Canonical tensors from a nanoGPT ckpt.pt or a gpt.py state_dict (needs torch)."""
    import torch
    obj = torch.load(path, map_location='cpu')
    if 'model' in obj and 'model_args' in obj:
        sd = {k.replace('_orig_mod.', '').replace('module.', ''): v.float().numpy() for k, v in obj['model'].items()}
        sd = {k[len('transformer.'):] if k.startswith('transformer.') else k: v for k, v in sd.items()}
        args = obj['model_args']
        C = args['n_embd']
        zeros = lambda n: np.zeros(n, np.float32)
        t = {'wte': sd['wte.weight'], 'wpe': sd['wpe.weight'], 'ln_f.w': sd['ln_f.weight'],
             'ln_f.b': sd.get('ln_f.bias', zeros(C))}
        if 'lm_head.weight' in sd and not np.array_equal(sd['lm_head.weight'], sd['wte.weight']):
            t['lm_head'] = sd['lm_head.weight']
        for l in range(args['n_layer']):
            p = 'h.%d.' % l
            for ours, theirs, n in (('ln_1', 'ln_1', C), ('ln_2', 'ln_2', C)):
                t['%d.%s.w' % (l, ours)] = sd[p + theirs + '.weight']
                t['%d.%s.b' % (l, ours)] = sd.get(p + theirs + '.bias', zeros(n))
            for ours, theirs, n in (('qkv', 'attn.c_attn', 3 * C), ('proj', 'attn.c_proj', C),
                                    ('fc', 'mlp.c_fc', 4 * C), ('fc2', 'mlp.c_proj', C)):
                t['%d.%s.w' % (l, ours)] = sd[p + theirs + '.weight']  # nn.Linear: [out, in]
                t['%d.%s.b' % (l, ours)] = sd.get(p + theirs + '.bias', zeros(n))
        return t, dict(n_layer=args['n_layer'], n_head=args['n_head'], eps=1e-5)
    sd = {k: v.float().numpy() for k, v in obj.items()}
    if 'token_embedding_table.weight' not in sd:
        sys.exit('%s: neither a nanoGPT ckpt.pt nor a gpt.py state_dict' % path)
    if not n_head:
        sys.exit('%s: a gpt.py state_dict does not record n_head; pass --n-head' % path)
    L = len({k.split('.')[1] for k in sd if k.startswith('blocks.')})
    C = sd['token_embedding_table.weight'].shape[1]
    t = {'wte': sd['token_embedding_table.weight'], 'wpe': sd['position_embedding_table.weight'],
         'ln_f.w': sd['ln_f.weight'], 'ln_f.b': sd['ln_f.bias'], 'lm_head': sd['lm_head.weight']}
    if np.any(sd['lm_head.bias'] != 0):
        print('note: lm_head.bias dropped (llama.cpp gpt2 has no output bias), max |b| = %.3g'
              % np.abs(sd['lm_head.bias']).max())
    for l in range(L):
        p = 'blocks.%d.' % l
        heads = [p + 'sa.heads.%d.' % h for h in range(n_head)]
        q = np.concatenate([sd[h + 'query.weight'] for h in heads])  # [C, C], head order
        k = np.concatenate([sd[h + 'key.weight'] for h in heads])
        v = np.concatenate([sd[h + 'value.weight'] for h in heads])
        t.update({'%d.ln_1.w' % l: sd[p + 'ln1.weight'], '%d.ln_1.b' % l: sd[p + 'ln1.bias'],
                  '%d.qkv.w' % l: np.concatenate([q, k, v]), '%d.qkv.b' % l: np.zeros(3 * C, np.float32),
                  '%d.proj.w' % l: sd[p + 'sa.proj.weight'], '%d.proj.b' % l: sd[p + 'sa.proj.bias'],
                  '%d.ln_2.w' % l: sd[p + 'ln2.weight'], '%d.ln_2.b' % l: sd[p + 'ln2.bias'],
                  '%d.fc.w' % l: sd[p + 'ffwd.net.0.weight'], '%d.fc.b' % l: sd[p + 'ffwd.net.0.bias'],
                  '%d.fc2.w' % l: sd[p + 'ffwd.net.2.weight'], '%d.fc2.b' % l: sd[p + 'ffwd.net.2.bias']})
    return t, dict(n_layer=L, n_head=n_head, eps=1e-5)


def gguf_names(n_layer):
    """(canonical name, GGUF tensor name) in file order; names from llama.cpp's llama-arch.cpp."""
    names = [('wte', 'token_embd.weight'), ('wpe', 'position_embd.weight'),
             ('ln_f.w', 'output_norm.weight'), ('ln_f.b', 'output_norm.bias'), ('lm_head', 'output.weight')]
    for l in range(n_layer):
        for ours, theirs in (('ln_1', 'attn_norm'), ('qkv', 'attn_qkv'), ('proj', 'attn_output'),
                             ('ln_2', 'ffn_norm'), ('fc', 'ffn_up'), ('fc2', 'ffn_down')):
            names += [('%d.%s.w' % (l, ours), 'blk.%d.%s.weight' % (l, theirs)),
                      ('%d.%s.b' % (l, ours), 'blk.%d.%s.bias' % (l, theirs))]
    return names


def quantize_q8_0(a):
    """[R, K] float32 (K % 32 == 0) -> bytes of ggml block_q8_0 {f16 d; int8 qs[32]} per 32 values."""
    blocks = a.reshape(-1, 32).astype(np.float32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
    inv = np.where(d == 0, 0.0, 1.0 / np.where(d == 0, 1.0, d))
    x = blocks * inv
    q = np.trunc(x + np.copysign(0.5, x)).astype(np.int8)  # roundf: half away from zero
    out = np.empty((blocks.shape[0], 34), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def encode(a, dtype):
    """(ggml type, bytes) for one tensor: vectors f32, matrices in dtype."""
    if a.ndim == 1:
        return GGML_F32, np.ascontiguousarray(a, '<f4').tobytes()
    if dtype == 'f16':
        return GGML_F16, np.ascontiguousarray(a, '<f2').tobytes()
    if a.shape[-1] % 32:
        sys.exit('q8_0 needs rows that are a multiple of 32 values, got %s' % (a.shape,))
    return GGML_Q8_0, quantize_q8_0(np.ascontiguousarray(a))


def gguf_string(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def write_gguf(path, tensors, cfg, dtype, name):
    C = tensors['wte'].shape[1]
    kvs = [('general.architecture', KV_STRING, 'gpt2'), ('general.name', KV_STRING, name),
           ('general.alignment', KV_U32, ALIGN), ('general.file_type', KV_U32, FILE_TYPE[dtype]),
           ('gpt2.context_length', KV_U32, tensors['wpe'].shape[0]), ('gpt2.embedding_length', KV_U32, C),
           ('gpt2.feed_forward_length', KV_U32, tensors['0.fc.w'].shape[0]),
           ('gpt2.block_count', KV_U32, cfg['n_layer']), ('gpt2.attention.head_count', KV_U32, cfg['n_head']),
           ('gpt2.attention.layer_norm_epsilon', KV_F32, cfg['eps']),
           ('gpt2.vocab_size', KV_U32, tensors['wte'].shape[0]), ('tokenizer.ggml.model', KV_STRING, 'none')]
    head = b'GGUF' + struct.pack('<IQQ', 3, 0, len(kvs))  # tensor count patched below
    for key, typ, val in kvs:
        head += gguf_string(key) + struct.pack('<I', typ)
        head += gguf_string(val) if typ == KV_STRING else struct.pack('<I' if typ == KV_U32 else '<f', val)
    infos, blobs, offset = b'', [], 0
    for ours, theirs in gguf_names(cfg['n_layer']):
        if ours not in tensors:
            continue
        a = tensors[ours]
        typ, data = encode(a, dtype)
        infos += gguf_string(theirs) + struct.pack('<I', a.ndim) + b''.join(struct.pack('<Q', d) for d in a.shape[::-1])
        infos += struct.pack('<IQ', typ, offset)
        pad = -len(data) % ALIGN
        blobs.append(data + b'\0' * pad)
        offset += len(data) + pad
    head = head[:8] + struct.pack('<Q', len(blobs)) + head[16:]
    meta = head + infos
    with open(path, 'wb') as f:
        f.write(meta + b'\0' * (-len(meta) % ALIGN))
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('src', help='model.safetensors (config.json beside it), nanoGPT ckpt.pt or gpt.py state_dict')
    ap.add_argument('--type', choices=('f16', 'q8_0'), required=True)
    ap.add_argument('--n-head', type=int, default=0, help='needed for a gpt.py state_dict')
    ap.add_argument('--fold-scale-embd', action='store_true',
                    help='the source scales attention by 1/sqrt(n_embd): fold sqrt(head_size/n_embd) into Q')
    ap.add_argument('-o', '--output', required=True)
    args = ap.parse_args()
    reader = from_hf if args.src.endswith('.safetensors') else from_torch
    tensors, cfg = reader(args.src, args.n_head)
    if args.fold_scale_embd:
        C = tensors['wte'].shape[1]
        for l in range(cfg['n_layer']):
            w, b = tensors['%d.qkv.w' % l].copy(), tensors['%d.qkv.b' % l].copy()
            s = np.sqrt(1.0 / cfg['n_head'])  # (1/sqrt(C)) / (1/sqrt(C / n_head))
            w[:C] *= s
            b[:C] *= s
            tensors['%d.qkv.w' % l], tensors['%d.qkv.b' % l] = w, b
    write_gguf(args.output, tensors, cfg, args.type, os.path.basename(args.src))
    print('wrote %s (%s, %.1f MB)' % (args.output, args.type, os.path.getsize(args.output) / 1e6))


if __name__ == '__main__':
    main()
