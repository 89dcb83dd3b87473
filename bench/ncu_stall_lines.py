#!/usr/bin/env python3
"""ncu_stall_lines.py SASS_CSV_GZ KERNEL BINARY [ROWS] — where a kernel's warps stall, by source line.

SASS_CSV_GZ is a device call's `<name>_sass.csv.gz` (device_session.sh's ncu_source: ncu's source
page, SASS with its stall samples per instruction); BINARY the build that was profiled (e.g.
build/cuda-device/bench_kda_cuda). Its cubins are disassembled with line information
(cuobjdump -xelf, nvdisasm -gi), each profiled instruction is matched by its offset in the
function, and its samples are summed under the innermost frame in a kda_*.cu file (inlined
helpers count at their caller's line there). Prints the kernel's stall reasons, its instruction
mix, then the ROWS (default 25) source lines with the most samples, each with its share of
long-scoreboard (global / local memory) waits. Needs cuobjdump and nvdisasm on PATH (the CUDA
toolkit, or the copies in Triton's wheel: triton/backends/nvidia/bin/).
"""
import collections, csv, glob, gzip, os, re, subprocess, sys, tempfile


def sass_rows(path, kernel):
    rows, hdr, cur = [], None, None
    for r in csv.reader(gzip.open(path, "rt")):
        if r and r[0] == "Kernel Name":
            cur = r[1].split("(")[0]
        elif r and r[0] == "Address":
            hdr = r
        elif hdr and cur == kernel and len(r) == len(hdr):
            rows.append(dict(zip(hdr, r)))
    return rows


def line_map(binary, kernel):
    """offset in the function -> (file, line) of the innermost kda_* frame"""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["cuobjdump", "-xelf", "all", os.path.abspath(binary)], cwd=d, capture_output=True, check=True)
        for cubin in sorted(glob.glob(os.path.join(d, "*.cubin"))):
            text = subprocess.run(["nvdisasm", "-gi", "-c", cubin], capture_output=True, text=True).stdout
            if re.search(r"\.text\.\S*" + kernel, text):
                break
        else:
            sys.exit(f"ncu_stall_lines: no cubin of {binary} has {kernel}")
    lines, infn, cur = {}, False, ("?", 0)
    for l in text.splitlines():
        if l.startswith("//----"):
            infn = kernel in l
        elif infn and l.strip().startswith("//## File"):
            fr = [(f.split("/")[-1], int(n)) for f, n in re.findall(r'"([^"]+)", line (\d+)', l)]
            fr = [x for x in fr if x[0].startswith("kda")]
            cur = fr[0] if fr else ("?", 0)
        elif infn:
            m = re.search(r"/\*([0-9a-f]{4,})\*/", l)
            if m:
                lines[int(m.group(1), 16)] = cur
    return lines


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, kernel, binary = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    rows = sass_rows(path, kernel)
    if not rows:
        sys.exit(f"ncu_stall_lines: {kernel} is not in {path}")
    lines = line_map(binary, kernel)
    base = int(rows[0]["Address"], 16)
    total = sum(int(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1
    executed = sum(int(r["Instructions Executed"]) for r in rows) or 1
    reasons, ops, by_line, long_sb = (collections.Counter() for _ in range(4))
    for r in rows:
        samples = int(r["Warp Stall Sampling (All Samples)"])
        for k, v in r.items():
            if k.startswith("stall_") and "Not Issued" not in k:
                reasons[k[6:]] += int(v or 0)
        words = r["Source"].split()
        op = (words[1] if words and words[0].startswith("@") and len(words) > 1 else words[0] if words else "?")
        ops[op.split(".")[0]] += int(r["Instructions Executed"])
        where = lines.get(int(r["Address"], 16) - base, ("?", 0))
        by_line[where] += samples
        long_sb[where] += int(r["stall_long_sb"] or 0)
    print(f"{kernel}: {total} stall samples, {executed} warp instructions")
    print("  stalls:", ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in reasons.most_common(8)))
    print("  instructions:", ", ".join(f"{k} {100 * v / executed:.0f}%" for k, v in ops.most_common(12)))
    for (f, n), v in by_line.most_common(top):
        print(f"  {100 * v / total:5.1f}% (long scoreboard {100 * long_sb[(f, n)] / total:4.1f}%)  {f}:{n}")


if __name__ == "__main__":
    main()
