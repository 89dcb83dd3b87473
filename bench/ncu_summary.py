#!/usr/bin/env python3
"""Per-kernel totals of an ncu CSV (`ncu --metrics gpu__time_duration.sum --csv --log-file F ...`).

Groups the launches by kernel name (template arguments and parameters dropped), prints each
group's total ms, launch count and share, largest first, with the cuBLAS GEMMs summed as one
line too. Usage: ncu_summary.py F.csv [--steps N] (N: how many steps the capture holds, to
print per-step times). With --all: every metric of every launch instead, one line each (for a
capture of a few kernels with several metrics).
"""
import csv
import re
import sys
from collections import defaultdict


def short_name(kernel):
    """The kernel's name without its parameters and template arguments."""
    return re.sub(r"<.*>", "<>", re.sub(r"\(.*", "", kernel)).strip()


def main():
    path = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 1
    rows = [r for r in csv.reader(l for l in open(path) if not l.startswith("=="))]
    head = rows[0]
    ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
    unit_i = head.index("Metric Unit") if "Metric Unit" in head else None
    if "--all" in sys.argv:
        for r in rows[1:]:
            if len(r) > max(ki, mi, vi):
                unit = r[unit_i] if unit_i is not None else ""
                name = re.sub(r"\(.*", "", r[ki]).strip()  # template arguments kept: they name variants
                print(f"  {name[:48]:48s} {r[mi]:72s} {r[vi]} {unit}")
        return
    tot, cnt = defaultdict(float), defaultdict(int)
    for r in rows[1:]:
        if len(r) <= max(ki, mi, vi) or r[mi] != "gpu__time_duration.sum":
            continue
        v = float(r[vi].replace(",", ""))
        unit = r[unit_i] if unit_i is not None else "ns"
        ms = v / {"nsecond": 1e6, "ns": 1e6, "usecond": 1e3, "us": 1e3, "msecond": 1.0, "ms": 1.0, "second": 1e-3}.get(unit, 1e6)
        name = short_name(r[ki])
        tot[name] += ms
        cnt[name] += 1
    all_ms = sum(tot.values())
    gemm = sum(v for k, v in tot.items() if re.search(r"gemm|sm90_xmma|cutlass|nvjet", k, re.I))
    print(f"{len(tot)} kernels, {sum(cnt.values())} launches, {all_ms / steps:.1f} ms per step "
          f"(serialised); cuBLAS GEMM kernels {gemm / steps:.1f} ms per step")
    print(f"{'ms/step':>9} {'launches':>9} {'share':>6}  kernel")
    for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:30]:
        print(f"{v / steps:9.2f} {cnt[k] // steps:9d} {100 * v / all_ms:5.1f}%  {k[:100]}")


if __name__ == "__main__":
    main()
