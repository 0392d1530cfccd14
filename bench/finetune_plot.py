"""Plots an `ember finetune --log` CSV (step,loss,val_loss,lr,tokens_per_s): the training loss
of each step and the held-out loss where it was evaluated, in nats per token.
    /usr/bin/python3 bench/finetune_plot.py LOG.csv OUT.png
Needs python3-matplotlib (scripts/install-deps.sh --tools)."""
import csv
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

if len(sys.argv) != 3:
    sys.exit('usage: finetune_plot.py LOG.csv OUT.png')
rows = list(csv.DictReader(open(sys.argv[1])))
train = [(int(r['step']), float(r['loss'])) for r in rows if r['loss']]
val = [(int(r['step']), float(r['val_loss'])) for r in rows if r['val_loss']]
if not train:
    sys.exit(f'{sys.argv[1]}: no training rows')
fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
ax.plot(*zip(*train), lw=0.8, color='#9ab', label='training loss (one batch per step)')
if val:
    ax.plot(*zip(*val), 'o-', ms=4, color='#c33', label='held-out loss (last 10% of the text)')
ax.set_xlabel('step')
ax.set_ylabel('cross-entropy (nats / character)')
ax.set_title(f'LoRA fine-tuning on alice.txt, lr {float(rows[-1]["lr"]):g}')
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2])
print(f'wrote {sys.argv[2]}: {len(train)} steps, {len(val)} evaluations')
