"""GPT-2's tokenizer in the Hugging Face tokenizers library's one-file layout (tokenizer.json),
written with plain json from tests/fixtures/gpt2/tiny_tokenizer (encoder.json + vocab.bpe);
Debian has no python3-tokenizers. Run with /usr/bin/python3.

  /usr/bin/python3 tools/make_tokenizer_json.py [--repo ROOT]

Writes tests/fixtures/real/tokenizer.json (merges as "a b" strings, as tokenizers < 0.20 save
them) and tokenizer_pairs.json (merges as ["a", "b"] pairs, as tokenizers >= 0.20 save them).
The layout follows GPT-2's tokenizer.json on the Hugging Face hub: model.type BPE, a ByteLevel
pre_tokenizer (add_prefix_space false), a ByteLevel decoder and post_processor, no normalizer,
<|endoftext|> as an added token.
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repo', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    src = os.path.join(args.repo, 'tests', 'fixtures', 'gpt2', 'tiny_tokenizer')
    with open(os.path.join(src, 'encoder.json'), encoding='utf-8') as f:
        vocab = json.load(f)
    with open(os.path.join(src, 'vocab.bpe'), encoding='utf-8') as f:
        merges = [l for l in f.read().split('\n') if l and not l.startswith('#version')]
    eot = vocab['<|endoftext|>']
    byte_level = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
    doc = {
        'version': '1.0', 'truncation': None, 'padding': None,
        'added_tokens': [{'id': eot, 'content': '<|endoftext|>', 'single_word': False, 'lstrip': False, 'rstrip': False,
                          'normalized': True, 'special': True}],
        'normalizer': None, 'pre_tokenizer': byte_level, 'post_processor': byte_level, 'decoder': byte_level,
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': '',
                  'end_of_word_suffix': '', 'fuse_unk': False, 'byte_fallback': False, 'vocab': vocab, 'merges': merges},
    }
    out = os.path.join(args.repo, 'tests', 'fixtures', 'real')
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'tokenizer.json'), 'w', encoding='utf-8') as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)
    doc['model']['merges'] = [m.split(' ') for m in merges]
    doc['model']['ignore_merges'] = False
    with open(os.path.join(out, 'tokenizer_pairs.json'), 'w', encoding='utf-8') as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)


if __name__ == '__main__':
    main()
