#!/usr/bin/env python3
"""Drift table: each run vs runs/A.jsonl (parity_spread.py's statistics + step-1 and bias)."""
import json, sys, itertools
import os
D = (sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")) + "/"
def L(n): return {r["iteration"]: r["loss"] for r in map(json.loads, open(D + n + ".jsonl"))}
def stats(ref, o, W=25):
    s = sorted(set(ref) & set(o)); rel = {k: abs(o[k] - ref[k]) / ref[k] for k in s}
    w = max(s, key=rel.get)
    wins = [max(rel[k] for k in s if w0 <= k < w0 + W) for w0 in range(1, s[-1] + 1, W)]
    signed = [(o[k] - ref[k]) / ref[k] for k in s if k > 50] or [0.0]
    return rel[1], rel[w], w, sum(rel.values()) / len(s), wins, sum(signed) / len(signed), sum(x < 0 for x in signed) / len(signed)
names = [n for n in ["Ainit1", "Ainit2", "Ainit3", "Agrad1", "R", "P", "RP"]]
A = L("A")
print(f"{'run':8} {'step1':>8} {'largest':>9} {'@step':>5} {'mean':>8}  {'largest per 25 steps':44} {'bias51+':>9} {'frac<A':>6}")
for n in names:
    try: o = L(n)
    except FileNotFoundError: continue
    s1, mx, w, mean, wins, bias, frac = stats(A, o)
    print(f"{n:8} {s1:8.1e} {mx:9.2e} {w:5d} {mean:8.2e}  {' '.join(f'{x:.1e}' for x in wins):44} {bias:+9.1e} {frac:6.2f}")
print("pairs among the perturbed baselines (A-vs-A' analogues):")
pert = [n for n in ["A", "Ainit1", "Ainit2", "Ainit3", "Agrad1"]]
for a, b in itertools.combinations(pert, 2):
    try: x, y = L(a), L(b)
    except FileNotFoundError: continue
    s1, mx, w, mean, wins, bias, frac = stats(x, y)
    print(f"{a}-{b}: largest {mx:.2e} @ {w}, mean {mean:.2e}, per 25: {' '.join(f'{v:.1e}' for v in wins)}")
for a, b in [("R", "RP"), ("P", "RP")]:
    try: x, y = L(a), L(b)
    except FileNotFoundError: continue
    s1, mx, w, mean, wins, bias, frac = stats(x, y)
    print(f"{a}-{b}: largest {mx:.2e} @ {w}, mean {mean:.2e}, per 25: {' '.join(f'{v:.1e}' for v in wins)}")
# bias check: each run against the mean loss of the baseline family (A, A' runs; leave-one-out)
fam = {n: L(n) for n in pert}
if all(len(v) == len(A) for v in fam.values()):
    print("vs mean of baseline family (A + A' runs, leave-one-out), steps 51-150:")
    for n in pert + ["R", "P", "RP"]:
        o = L(n); others = [fam[m] for m in pert if m != n]
        rel = [(o[k] - sum(x[k] for x in others) / len(others)) / o[k] for k in range(51, len(A) + 1)]
        print(f"  {n:7} mean signed {sum(rel)/len(rel):+.1e}  mean |.| {sum(map(abs, rel))/len(rel):.1e}  largest |.| {max(map(abs, rel)):.1e}")
