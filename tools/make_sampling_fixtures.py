"""Make tests/fixtures/sampling/expected.json: the repetition penalty and stop strings on the
gpt.py fixture model (tests/fixtures/gptpy/model.pt), computed by PyTorch. Deterministic;
run with Debian's /usr/bin/python3:

  /usr/bin/python3 tools/make_sampling_fixtures.py [--repo ROOT]

expected.json:
  {"prompt": TEXT, "prompt_ids": [...], "block_size": S,
   "penalty": [{"penalty": R, "last_n": N, "recent": [ids], "logits": [V], "penalized": [V]}],
       logits: the f32 next-token logits after the prompt; penalized: them after Hugging Face's
       RepetitionPenaltyLogitsProcessor (torch.gather, torch.where(score < 0, score * R,
       score / R), scatter_) over recent = the last N ids (N = -1: block_size);
   "greedy_penalty": [{"penalty": R, "last_n": N, "new_tokens": K, "ids": [prompt + K ids]}],
       the lecture's generate with argmax (crop to block_size) over penalized logits;
   "greedy": {"new_tokens": K, "ids": [...], "text": generated text (prompt excluded)},
   "stops": [{"stops": [STR...], "printed": TEXT, "tokens": K}]}
       stop strings on the greedy text: generation ends with the first token after which the
       text holds a stop string; printed is the text before the earliest one it holds (the
       stop string is not printed, as in llama.cpp); tokens: the tokens sampled (new_tokens
       when none occurs).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptpy_model import GPTLanguageModel  # noqa: E402

PROMPT = 'The cafe'
N_LAYER, N_HEAD, N_EMBD, BLOCK_SIZE = 2, 4, 32, 16  # tools/make_fixtures.py's gpt.py fixture


def hf_repetition_penalty(logits, recent, penalty):
    """transformers.RepetitionPenaltyLogitsProcessor.__call__ on one row."""
    scores = logits.clone().unsqueeze(0)
    input_ids = torch.tensor([recent], dtype=torch.long)
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    scores.scatter_(1, input_ids, score)
    return scores[0]


def recent_ids(ids, last_n):
    n = BLOCK_SIZE if last_n < 0 or last_n > BLOCK_SIZE else last_n
    return ids[-n:] if n > 0 else []


def next_logits(model, ids):
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids[-BLOCK_SIZE:]], dtype=torch.long))
    return logits[0, -1]


def greedy(model, prompt_ids, new_tokens, penalty=1.0, last_n=0):
    ids = list(prompt_ids)
    for _ in range(new_tokens):
        logits = next_logits(model, ids)
        recent = recent_ids(ids, last_n)
        if penalty != 1.0 and recent:
            logits = hf_repetition_penalty(logits, recent, penalty)
        ids.append(int(torch.argmax(logits)))  # the first maximal index
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repo', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    args = ap.parse_args()
    fx = os.path.join(args.repo, 'tests', 'fixtures')
    with open(os.path.join(fx, 'gptpy', 'vocab.txt'), encoding='utf-8') as f:
        chars = sorted(set(f.read()))
    stoi = {c: i for i, c in enumerate(chars)}
    model = GPTLanguageModel(len(chars), N_EMBD, N_HEAD, N_LAYER, BLOCK_SIZE)
    model.load_state_dict(torch.load(os.path.join(fx, 'gptpy', 'model.pt')))
    model.eval()
    prompt_ids = [stoi[c] for c in PROMPT]
    out = {'prompt': PROMPT, 'prompt_ids': prompt_ids, 'block_size': BLOCK_SIZE, 'penalty': [], 'greedy_penalty': []}

    logits = next_logits(model, prompt_ids)
    for penalty, last_n in [(1.3, 4), (1.5, -1), (0.7, 64)]:
        recent = recent_ids(prompt_ids, last_n)
        out['penalty'].append({'penalty': penalty, 'last_n': last_n, 'recent': recent, 'logits': logits.tolist(),
                               'penalized': hf_repetition_penalty(logits, recent, penalty).tolist()})
    n_new = 3 * BLOCK_SIZE
    for penalty, last_n in [(1.3, 8), (2.0, -1)]:
        ids = greedy(model, prompt_ids, n_new, penalty, last_n)
        out['greedy_penalty'].append({'penalty': penalty, 'last_n': last_n, 'new_tokens': n_new, 'ids': ids})
    plain = greedy(model, prompt_ids, n_new)
    for g in out['greedy_penalty']:
        assert g['ids'] != plain, 'the penalty must change the greedy sequence for the test to mean something'

    text = ''.join(chars[i] for i in plain[len(prompt_ids):])
    out['greedy'] = {'new_tokens': n_new, 'ids': plain, 'text': text}
    # Stop strings: one from the middle of the text, two where the earlier one wins, one that
    # never occurs, one of two characters whose first is printed often before it completes.
    mid = text[20:23]
    early = text[8:10]
    never = 'qqq'
    cases = [[mid], [mid, early], [never], [text[-2:]]]
    out['stops'] = []
    for stops in cases:
        # The first token after which the text holds a stop string; printed: the text before
        # the earliest of those it holds. One character per token.
        printed, tokens = text, n_new
        for k in range(1, len(text) + 1):
            held = [text[:k].find(st) for st in stops if st in text[:k]]
            if held:
                printed, tokens = text[:min(held)], k
                break
        out['stops'].append({'stops': stops, 'printed': printed, 'tokens': tokens})
    path = os.path.join(fx, 'sampling', 'expected.json')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False)
        f.write('\n')
    print('wrote', path)
    print('greedy text:', repr(text))
    for s in out['stops']:
        print('stops', s['stops'], '->', repr(s['printed']), s['tokens'], 'tokens')
    for g in out['greedy_penalty']:
        print('penalty', g['penalty'], g['last_n'], repr(''.join(chars[i] for i in g['ids'])))


if __name__ == '__main__':
    main()
