"""Turns bench/vs_llama.sh's records into bench/llama_results.md (printed) and bench/llama_plot.png.

  /usr/bin/python3 bench/llama_report.py bench/out/vs_llama > bench/llama_results.md

Figures per (model, weights, threads) are medians over the rounds; ratios are ember / llama.cpp
(above 1: ember faster, or for RSS and start-up: ember larger / slower). The plot's bound is
decode tokens/s = best measured read bandwidth (bench/membw.cpp, same thread count) / weight bytes.
"""
import json
import os
import statistics
import sys
from datetime import date

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = {'shipped': 'shipped model (4 x 128, block 128)', 'full': "lecture's full config (6 x 384, block 256)",
         'gpt2': 'GPT-2 124M shape (12 x 768, block 1024)'}


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def med(rows, key):
    v = [float(r[key]) for r in rows]
    return statistics.median(v) if v else float('nan')


def main():
    d = sys.argv[1]
    bench, startup, torch_rows = load(f'{d}/bench.jsonl'), load(f'{d}/startup.jsonl'), load(f'{d}/torch.jsonl')
    membw, check = load(f'{d}/membw.jsonl'), load(f'{d}/check.jsonl')
    cpu = open(f'{d}/cpu.txt').read().split('\n')
    loads = open(f'{d}/load.txt').read().strip().split('\n')
    commit = open(f'{d}/commit.txt').read().strip()
    bw = {t: max(r['read_GB_s'] for r in membw if r['threads'] == t) for t in {r['threads'] for r in membw}}
    bw_low = {t: min(r['read_GB_s'] for r in membw if r['threads'] == t) for t in bw}
    variant = next(r['cpu_variant'] for r in bench if r['engine'] == 'llama.cpp')
    feats = next(r['cpu_features'] for r in bench if r['engine'] == 'llama.cpp')
    models = [m for m in NAMES if any(r['model'] == m for r in bench)]

    def sel(**kw):
        return [r for r in bench if all(str(r.get(k)) == str(v) for k, v in kw.items())]

    p = print
    p(f'Measured {date.today().isoformat()} by `bench/vs_llama.sh` at commit {commit}: {cpu[0].split(":", 1)[1].strip()}, '
      f'{cpu[2]} vCPUs (the load each model began at is below).')
    p()
    p(f'- CPU flags (SIMD): {" ".join(f for f in cpu[1].split() if f.startswith(("avx", "fma", "f16c", "amx", "sse4")))}.')
    p(f'- llama.cpp: node-llama-cpp 3.21.1 prebuilt (llama.cpp bundled as its `v0.4.0` release), CPU variant '
      f'`{variant}` (ggml scored every variant, loaded that one), features: {feats}.')
    p('- Load (uptime) before each model: ' + '; '.join(l.split('load average:')[0].split()[0] + ' ' +
                                                      l.split('load average:')[1].strip() for l in loads) + '.')
    p(f'- Memory read bandwidth (bench/membw.cpp, best of 5, before and after): ' +
      ', '.join(f'{t} thread(s) {bw_low[t]:.1f} to {bw[t]:.1f} GB/s' for t in sorted(bw)) + '.')
    p()
    p('Writer check (bench/llama/check.py, llama.cpp logits vs PyTorch on the same weights, 16 to 64 ids): ' +
      '; '.join(f'`{c["src"]}` {c["dtype"]} NMSE '
                f'{c["nmse"]:.1e} (tol {c["tol"]:g}) {"pass" if c["pass"] else "FAIL"}' for c in check) + '.')
    p()
    p('| model | weights ember / llama.cpp | threads | decode short tok/s ember / llama.cpp (ratio) | '
      'decode long tok/s (ratio) | prefill tok/s (ratio) | peak RSS MB (ratio) |')
    p('|---|---|---|---|---|---|---|')
    plot = []
    for m in models:
        for pair in ('int8:q8_0', 'f16:f16'):
            for th in (1, 2):
                def fig(ctx, key, scale=1.0):
                    e = med(sel(model=m, pair=pair, threads=th, ctx=ctx, engine='ember'), key) * scale
                    l = med(sel(model=m, pair=pair, threads=th, ctx=ctx, engine='llama.cpp'), key) * scale
                    return e, l
                ds, dl, pf = fig('short', 'decode_tok_s'), fig('long', 'decode_tok_s'), fig('short', 'prefill_tok_s')
                rss = fig('long', 'rss_kb', 1024 / 1e6)
                we = sel(model=m, pair=pair, engine='ember')[0]['weight_bytes']
                wl = sel(model=m, pair=pair, engine='llama.cpp')[0]['weight_bytes']
                n_s = sel(model=m, pair=pair, ctx='short')[0]['decode_tokens']
                n_l = sel(model=m, pair=pair, ctx='long')[0]['decode_tokens']
                cell = lambda v, f='%.0f': f'{f % v[0]} / {f % v[1]} ({v[0] / v[1]:.2f}x)'
                p(f'| {m} | {pair.replace(":", " / ")} ({we / 1e6:.1f} / {wl / 1e6:.1f} MB) | {th} | {cell(ds)} [{n_s}] | '
                  f'{cell(dl)} [{n_l}] | {cell(pf)} | {cell(rss, "%.1f")} |')
                plot.append((m, pair, th, we, wl, ds))
    p()
    p('| model | weights | start-up ms, process start to first token, ember / llama.cpp (ratio) | llama.cpp inside its process |')
    p('|---|---|---|---|')
    for m in models:
        for pair in ('int8:q8_0', 'f16:f16'):
            e = statistics.median(r['wall_ms'] for r in startup if r['model'] == m and r['pair'] == pair and r['engine'] == 'ember')
            rs = [r for r in startup if r['model'] == m and r['pair'] == pair and r['engine'] == 'llama.cpp']
            lw = statistics.median(float(r['wall_ms']) for r in rs)
            li = statistics.median(r['startup_ms'] for r in rs)
            p(f'| {m} | {pair.replace(":", " / ")} | {e:.0f} / {lw:.0f} ({e / lw:.2f}x) | {li:.0f} |')
    p()
    if torch_rows:
        p('PyTorch (`bench/peer_torch.py`, gpt.py\'s generate: a full forward per token, no KV cache; f32; 1 thread): ' +
          '; '.join(f'{r["model"]}: decode {r["decode_tok_s"]:.1f} tok/s ({r["decode_tokens"] if "decode_tokens" in r else "block_size-1"} tokens), '
                    f'prefill {r["prefill_tok_s"]:.0f} tok/s' for r in torch_rows) + '.')

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    styles = {('ember', 'int8:q8_0'): ('ember int8', 'C0', 'o', '-'), ('llama', 'int8:q8_0'): ('llama.cpp q8_0', 'C1', 's', '-'),
              ('ember', 'f16:f16'): ('ember f16', 'C0', 'o', '--'), ('llama', 'f16:f16'): ('llama.cpp f16', 'C1', 's', '--')}
    for ax, th in zip(axes, (1, 2)):
        for (eng, pair), (label, col, mk, ls) in styles.items():
            pts = sorted((we if eng == 'ember' else wl, ds[0] if eng == 'ember' else ds[1])
                         for m, pr, t, we, wl, ds in plot if pr == pair and t == th)
            ax.plot([x / 1e6 for x, _ in pts], [y for _, y in pts], marker=mk, color=col, linestyle=ls, label=label,
                    markerfacecolor='none' if ls == '--' else col)
        xs = sorted({we for _, _, t, we, _, _ in plot if t == th} | {wl for _, _, t, _, wl, _ in plot if t == th})
        if th in bw:
            ax.plot([x / 1e6 for x in xs], [bw[th] * 1e9 / x for x in xs], color='gray', linestyle=':',
                    label=f'bandwidth bound ({bw[th]:.1f} GB/s / weight bytes)')
        if th == 1 and torch_rows:
            f16_bytes = {m: wl for m, pr, t, we, wl, _ in plot if pr == 'f16:f16' and t == 1}
            pts = sorted((2 * f16_bytes[r['model']], r['decode_tok_s']) for r in torch_rows if r['model'] in f16_bytes)
            ax.plot([x / 1e6 for x, _ in pts], [y for _, y in pts], marker='^', color='C2', label='PyTorch f32 (gpt.py generate)')
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('weight bytes (MB, log)')
        ax.set_title(f'{th} thread{"s" if th > 1 else ""}')
        ax.grid(True, which='both', alpha=0.3)
    axes[0].set_ylabel(f'decode tokens/s, short context (log)')
    for ax in axes:
        ax.legend(fontsize=7, loc='lower left')
    fig.suptitle(f'Decode speed against model size, same run ({date.today().isoformat()}, 2 shared vCPUs, {variant})', fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(REPO, 'bench', 'llama_plot.png'), dpi=110)


if __name__ == '__main__':
    main()
