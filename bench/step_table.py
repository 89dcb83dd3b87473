#!/usr/bin/env python3
"""The table of bench/step_vs_fla.sh's logs (one or more): kda and FLA per (model, micro-batch), and the ratio.

Reads the `== kda MODEL micro-batch B [(VARIANT)]` headers and `kda bench` lines, and FLA's
`FLA MODEL micro-batch B x T: ...` lines; prints a markdown table (tokens/s, MFU, peak memory,
and tokens per joule where either side's log has the board's energy counter).
A kda row with a variant (e.g. "recompute none") is compared with FLA's row of its size.
"""
import re
import sys


def parse(lines):
    rows, cur = {}, None
    for ln in lines:
        m = re.match(r"== kda (\S+) micro-batch (\d+)(?: \((.*)\))?", ln)
        if m:
            cur = (m.group(1), int(m.group(2)), m.group(3) or "")
            rows.setdefault(cur, {})
            continue
        m = re.search(r"\| (\d+) tokens/s \|", ln)
        if m and cur and ln.lstrip().startswith("step"):
            rows[cur]["kda_tps"] = float(m.group(1))
        m = re.search(r"MFU ([\d.]+)%", ln)
        if m and cur and "TFLOP/s achieved" in ln:
            rows[cur]["kda_mfu"] = float(m.group(1))
        m = re.search(r"GPU memory in use \(peak\): ([\d.]+) GiB", ln)
        if m and cur:
            rows[cur]["kda_mem"] = float(m.group(1))
        m = re.search(r"energy through the timed steps: .*\| (\d+) tokens per joule", ln)
        if m and cur:
            rows[cur]["kda_tpj"] = float(m.group(1))
        m = re.match(r"FLA (\S+) micro-batch (\d+) x \d+: .*\| (\d+) tokens/s \| MFU ([\d.]+)% \| peak ([\d.]+) GiB", ln)
        if m:
            key = (m.group(1), int(m.group(2)), "")
            rows.setdefault(key, {}).update(fla_tps=float(m.group(3)), fla_mfu=float(m.group(4)),
                                           fla_mem=float(m.group(5)))
            m = re.search(r"J a step, (\d+) tokens per joule", ln)
            if m:
                rows[key]["fla_tpj"] = float(m.group(1))
        elif re.match(r"FLA (\S+) micro-batch (\d+) x \d+: out of memory", ln):
            m = re.match(r"FLA (\S+) micro-batch (\d+)", ln)
            rows.setdefault((m.group(1), int(m.group(2)), ""), {})["fla_oom"] = True
    return rows


def both(r, name, fmt):
    """kda's and FLA's value of one column as "kda / FLA", "-" for a side without it."""
    return " / ".join(format(r[s], fmt) if s in r else "-" for s in (f"kda_{name}", f"fla_{name}"))


def main():
    lines = []
    for path in sys.argv[1:]:
        lines += open(path).read().splitlines()
    rows = parse(lines)
    energy = any("kda_tpj" in r or "fla_tpj" in r for r in rows.values())
    print("| config, micro-batch x 2048 | kda tokens/s (MFU) | FLA tokens/s (MFU) | kda / FLA | peak memory kda / FLA |"
          + (" tokens per joule kda / FLA |" if energy else ""))
    print("|---|---|---|---|---|" + ("---|" if energy else ""))
    for (model, b, variant), r in rows.items():
        fla = rows.get((model, b, ""), {})
        r = {**{k: v for k, v in fla.items() if k.startswith("fla")}, **r}
        k = f"{r['kda_tps'] / 1e3:.1f}k ({r.get('kda_mfu', 0):.1f}%)" if "kda_tps" in r else "-"
        f = f"{r['fla_tps'] / 1e3:.1f}k ({r['fla_mfu']:.1f}%)" if "fla_tps" in r else ("OOM" if r.get("fla_oom") else "-")
        ratio = f"{r['kda_tps'] / r['fla_tps']:.2f}" if "kda_tps" in r and "fla_tps" in r else "-"
        mem = both(r, "mem", ".1f") + " GiB"
        tpj = both(r, "tpj", ".0f")
        print(f"| {model}, {b}{', ' + variant if variant else ''} | {k} | {f} | {ratio} | {mem} |"
              + (f" {tpj} |" if energy else ""))


if __name__ == "__main__":
    main()
