#!/usr/bin/python3
"""Write the checkpoint-reader fixtures that tests/test_checkpoint.cpp reads.

Run once with Debian's python3-torch (1.13) from the repo root:
  /usr/bin/python3 tools/make_bad_fixtures.py
It writes tests/fixtures/reader/ (good files) and tests/fixtures/bad/ (inputs that must be
refused), and prints the values PyTorch reads back, which the test hard-codes.
Deterministic: no random state except a seeded random.Random.
"""
import io
import json
import os
import pickle
import random
import struct
import zipfile
from collections import OrderedDict

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'fixtures')
READER = os.path.join(ROOT, 'reader')
BAD = os.path.join(ROOT, 'bad')


def write(path, data):
    with open(path, 'wb') as f:
        f.write(data)


def saved(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def rezip(data, change):
    """Copies zip `data`, passing each (name, bytes) through change(); None drops it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as zout:
        for name in zin.namelist():
            content = change(name, zin.read(name))
            if content is not None:
                zout.writestr(name, content)
    return out.getvalue()


def safetensors_bytes(tensors, header_extra=None):
    """A .safetensors file (the format is small enough to write by hand)."""
    header = {'__metadata__': {'format': 'pt'}}
    data = b''
    names = {torch.float32: 'F32', torch.float16: 'F16', torch.bfloat16: 'BF16'}
    for name, t in tensors.items():
        t = t.contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {'dtype': names[t.dtype], 'shape': list(t.shape),
                        'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    if header_extra:
        header.update(header_extra)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + data


def main():
    os.makedirs(READER, exist_ok=True)
    os.makedirs(BAD, exist_ok=True)

    # ---- good: a nanoGPT-like dict exercising views, dtypes, parameters, tying ----
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    big = torch.arange(20, dtype=torch.float32).reshape(5, 4)
    tied = torch.tensor([[0.5, -1.0], [2.0, 4.5]])
    model = OrderedDict()
    model['t'] = base.t()                      # non-contiguous: stride (1, 4)
    model['s'] = big[1:4, 1:3]                 # storage offset 5, stride (4, 1)
    model['h'] = torch.tensor([[1.5, -2.25, 65504.0], [6.103515625e-05, 5.960464477539063e-08, float('-inf')]],
                              dtype=torch.float16)
    model['b'] = torch.tensor([[1.0, -3.140625], [3.3895313892515355e+38, 0.0078125]], dtype=torch.bfloat16)
    model['p'] = torch.nn.Parameter(torch.tensor([0.25, -0.5]))
    model['tied_a'] = tied
    model['tied_b'] = tied                     # the same storage, as nanoGPT's wte / lm_head
    model['scalar'] = torch.tensor(3.25)       # 0-d
    ckpt = {
        'model': model,
        'optimizer': {'state': {0: {'step': torch.tensor(3.0), 'exp_avg': torch.zeros(2)}}},
        'model_args': {'n_layer': 1, 'n_head': 2, 'bias': True, 'dropout': 0.1, 'name': 'tiny', 'extra': None},
        'iter_num': 7,
        'step': torch.tensor(5),               # a LongStorage outside the model: skipped
        'best_val_loss': torch.tensor(1.5),
    }
    views = saved(ckpt)
    write(os.path.join(READER, 'views.pt'), views)
    back = torch.load(io.BytesIO(views))['model']
    for k, v in back.items():
        print(k, tuple(v.shape), v.dtype, 'offset', v.storage_offset(), 'stride', v.stride(),
              [float(x) for x in v.float().flatten().tolist()])

    # ---- good: safetensors with F32, F16 and BF16 ----
    st = OrderedDict()
    st['w'] = torch.tensor([[1.0, -2.0, 0.5], [3.25, 0.0, -0.125]])
    st['h'] = torch.tensor([0.333251953125, -1024.0], dtype=torch.float16)
    st['b'] = torch.tensor([2.5, -0.01171875], dtype=torch.bfloat16)
    write(os.path.join(READER, 'tiny.safetensors'), safetensors_bytes(st))
    for k, v in st.items():
        print('safetensors', k, tuple(v.shape), v.dtype, [float(x) for x in v.float().flatten().tolist()])

    # ---- good: a meta.pkl (protocol 4, as nanoGPT's prepare.py writes it) ----
    chars = ['\n', ' ', 'a', '\u00e9', '\u20ac', '\U0001F600']
    meta = {'vocab_size': len(chars), 'itos': dict(enumerate(chars)), 'stoi': {c: i for i, c in enumerate(chars)}}
    write(os.path.join(READER, 'meta.pkl'), pickle.dumps(meta, protocol=4))

    # ---- bad inputs ----
    write(os.path.join(BAD, 'truncated.pt'), views[:len(views) // 2])
    write(os.path.join(BAD, 'text.txt'), b'First Citizen:\nBefore we proceed any further, hear me speak.\n')
    rnd = random.Random(7).randbytes(512)
    assert not rnd.startswith(b'PK') and rnd[8:9] != b'{'
    write(os.path.join(BAD, 'random.bin'), rnd)

    evil = b'\x80\x02cos\nsystem\nX\x02\x00\x00\x00lsq\x00\x85q\x01R.'
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
        z.writestr('archive/data.pkl', evil)
        z.writestr('archive/version', '3\n')
    write(os.path.join(BAD, 'evil_global.pt'), out.getvalue())

    write(os.path.join(BAD, 'whole_module.pt'), saved(torch.nn.Linear(2, 2)))
    # A state_dict one level down, as Lightning saves it: its keys are named in the refusal.
    write(os.path.join(BAD, 'nested_state_dict.pt'),
          saved({'state_dict': {'w': torch.zeros(2, 2), 'b': torch.zeros(2)}, 'epoch': 3}))

    write(os.path.join(BAD, 'model_args_laughs.pt'), model_args_laughs_zip())

    square = saved({'w': torch.arange(16, dtype=torch.float32).reshape(4, 4)})
    write(os.path.join(BAD, 'short_storage.pt'),
          rezip(square, lambda n, c: c[:32] if n.endswith('/data/0') else c))
    write(os.path.join(BAD, 'missing_storage.pt'),
          rezip(square, lambda n, c: None if n.endswith('/data/0') else c))
    write(os.path.join(BAD, 'big_endian.pt'),
          rezip_with(square, 'archive/byteorder', b'big'))
    write(os.path.join(BAD, 'cut_pickle.pt'),
          rezip(square, lambda n, c: c[:len(c) // 2] if n.endswith('data.pkl') else c))
    write(os.path.join(BAD, 'long_model.pt'), saved({'w': torch.zeros(2), 'idx': torch.arange(3)}))

    sf = safetensors_bytes({'w': torch.zeros(2, 2)},
                           {'late': {'dtype': 'F32', 'shape': [4, 4], 'data_offsets': [16, 80]}})
    write(os.path.join(BAD, 'bad_offsets.safetensors'), sf)

    write(os.path.join(BAD, 'meta_missing.pkl'),
          pickle.dumps({'vocab_size': 3, 'itos': {0: 'a', 2: 'c'}, 'stoi': {'a': 0, 'c': 2}}, protocol=4))
    write(os.path.join(BAD, 'meta_two_chars.pkl'),
          pickle.dumps({'vocab_size': 2, 'itos': {0: 'a', 1: 'bc'}, 'stoi': {'a': 0, 'bc': 1}}, protocol=4))
    # Ids not in code-point order: a valid pickle that ember's ascending char tokenizer cannot hold.
    write(os.path.join(BAD, 'meta_unsorted.pkl'),
          pickle.dumps({'vocab_size': 2, 'itos': {0: 'b', 1: 'a'}, 'stoi': {'b': 0, 'a': 1}}, protocol=4))

    # Zero-element tensors with a huge first dimension: head_size 2^62 x n_head 4 overflowed int64.
    write(os.path.join(BAD, 'head_size_overflow.pt'), saved({
        'token_embedding_table.weight': torch.zeros(2, 0),
        'position_embedding_table.weight': torch.zeros(4, 0),
        **{f'blocks.0.sa.heads.{h}.query.weight': torch.zeros(2**62, 0) for h in range(4)}}))

    # A nanoGPT checkpoint whose model_args.n_head (3) does not divide n_embd (32).
    fixtures = os.path.join(os.path.dirname(BAD))
    nano = torch.load(os.path.join(fixtures, 'nanogpt', 'ckpt.pt'))
    nano = {'model': nano['model'], 'model_args': dict(nano['model_args'], n_head=3)}
    write(os.path.join(BAD, 'nanogpt_n_head_3.pt'), saved(nano))


def model_args_laughs_zip():
    """{'model': {}, 'model_args': {'x': L30}} where L0 = [] and Lk = [Lk-1, Lk-1] through the
    memo: 2^31 values as a tree from a pickle of a few hundred bytes ("billion laughs")."""
    pkl = b'\x80\x02}(X\x05\x00\x00\x00model}X\x0a\x00\x00\x00model_args}X\x01\x00\x00\x00x'
    pkl += b']q\x000'
    for k in range(1, 31):
        pkl += b'(h' + bytes([k - 1]) + b'h' + bytes([k - 1]) + b'lq' + bytes([k]) + b'0'
    pkl += b'h\x1esu.'
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
        z.writestr('archive/data.pkl', pkl)
        z.writestr('archive/version', '3\n')
    return out.getvalue()


def rezip_with(data, name, content):
    """Copies zip `data` and adds (or replaces) entry `name`."""
    replaced = rezip(data, lambda n, c: None if n == name else c)
    out = io.BytesIO(replaced)
    with zipfile.ZipFile(out, 'a', zipfile.ZIP_STORED) as z:
        z.writestr(name, content)
    return out.getvalue()


if __name__ == '__main__':
    main()
