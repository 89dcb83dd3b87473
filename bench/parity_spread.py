#!/usr/bin/env python3
"""parity_spread.py — how far recorded training runs drift apart, step by step.

  python3 bench/parity_spread.py REF.jsonl OTHER.jsonl [OTHER2.jsonl ...] [--window 25]

Each file is a metrics file of bench/parity_vs_fla.sh (kda's metrics_file or FLA's
fla_parity_train.py output: JSON lines with "iteration" and "loss"). For every OTHER it prints the
largest relative loss difference to REF (and its step), the mean, and the largest per window of
steps, so that kda-vs-FLA drift can be set beside FLA-vs-FLA drift (FLA's own kernels are not
deterministic: two FLA runs of the same batches differ too). Issue 17's bound is the largest
relative difference at any step, <= 3e-3.
"""
import argparse
import json
import sys


def losses(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "iteration" in r and "loss" in r:
            out[int(r["iteration"])] = float(r["loss"])
    if not out:
        sys.exit(f"parity_spread: {path}: no lines with iteration and loss")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("others", nargs="+")
    ap.add_argument("--window", type=int, default=25)
    a = ap.parse_args()
    ref = losses(a.ref)
    print(f"reference {a.ref}: {len(ref)} steps")
    for path in a.others:
        o = losses(path)
        steps = sorted(set(ref) & set(o))
        if not steps:
            sys.exit(f"parity_spread: {path} shares no step with {a.ref}")
        rel = {s: abs(o[s] - ref[s]) / abs(ref[s]) for s in steps}
        worst = max(steps, key=lambda s: rel[s])
        wins = []
        for w0 in range(steps[0], steps[-1] + 1, a.window):
            ws = [rel[s] for s in steps if w0 <= s < w0 + a.window]
            if ws:
                wins.append(f"{max(ws):.1e}")
        print(f"{path}: {len(steps)} steps, largest {rel[worst]:.3e} at step {worst} (loss {ref[worst]:.4f}), "
              f"mean {sum(rel.values()) / len(steps):.2e}; largest per {a.window} steps: {' '.join(wins)}")


if __name__ == "__main__":
    main()
