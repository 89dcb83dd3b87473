#!/usr/bin/env python3
"""ncu_stall_lines.py SASS_CSV_GZ KERNEL BINARY [ROWS] — where a kernel's warps stall, by source line.

SASS_CSV_GZ is a device call's `<name>_sass.csv.gz` (device_session.sh's ncu_source: ncu's source
page, SASS with its stall samples per instruction); KERNEL the kernel's name without its template
arguments (kda_finish_kernel: of a template, the instantiation that ncu profiled first, matched
in the binary by its mangled arguments); BINARY the build that was profiled (e.g.
build/cuda-device/bench_kda_cuda). Its cubins are disassembled with line information
(cuobjdump -xelf, nvdisasm -gi), each profiled instruction is matched by its offset in the
function, and its samples are summed under the innermost frame in a kda_*.cu file (inlined
helpers count at their caller's line there). Prints the kernel's stall reasons, its instruction
mix, then the ROWS (default 25) source lines with the most samples, each with its share of
long-scoreboard (global / local memory) waits. Needs cuobjdump and nvdisasm on PATH (the CUDA
toolkit, or the copies in Triton's wheel: triton/backends/nvidia/bin/).
"""
import collections, csv, glob, gzip, os, re, subprocess, sys, tempfile


def kernel_of(name):
    """ncu's kernel name -> (base name, template arguments as Itanium-mangled, '' if none), e.g.
    'void kda_finish_kernel<(int)64, (bool)1>(kda_shape, ...)' -> ('kda_finish_kernel', 'ILi64ELb1EE')"""
    m = re.match(r"(?:void )?([A-Za-z_]\w*)(<[^>]*>)?", name)
    if not m:
        return name, ""
    args = re.findall(r"\((int|bool)\)(-?\d+)", m.group(2) or "")
    mangled = "".join(("Li" if t == "int" else "Lb") + v.replace("-", "n") + "E" for t, v in args)
    return m.group(1), ("I" + mangled + "E" if mangled else "")


def sass_rows(path, kernel):
    """the rows of KERNEL's first profiled instantiation, and its mangled template arguments"""
    rows, hdr, cur, targs = [], None, None, None
    for r in csv.reader(gzip.open(path, "rt")):
        if r and r[0] == "Kernel Name":
            base, ta = kernel_of(r[1])
            cur = base == kernel and (targs is None or ta == targs)
            if cur and targs is None:
                targs = ta
        elif r and r[0] == "Address":
            hdr = r
        elif hdr and cur and len(r) == len(hdr):
            rows.append(dict(zip(hdr, r)))
    return rows, targs or ""


def line_map(binary, kernel, targs):
    """offset in the function -> (file, line) of the innermost kda_* frame"""
    # the symbol: the plain name, or _Z<length><name><template arguments><parameters>
    sym = re.compile(r"\.text\.(?:" + re.escape(kernel) + r"\b|_Z\d+" + re.escape(kernel + targs) + ")")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["cuobjdump", "-xelf", "all", os.path.abspath(binary)], cwd=d, capture_output=True, check=True)
        for cubin in sorted(glob.glob(os.path.join(d, "*.cubin"))):
            text = subprocess.run(["nvdisasm", "-gi", "-c", cubin], capture_output=True, text=True).stdout
            if sym.search(text):
                break
        else:
            sys.exit(f"ncu_stall_lines: no cubin of {binary} has {kernel}{targs}")
    lines, infn, cur = {}, False, ("?", 0)
    for l in text.splitlines():
        if l.startswith("//----"):
            infn = bool(sym.search(l))
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
    rows, targs = sass_rows(path, kernel)
    if not rows:
        sys.exit(f"ncu_stall_lines: {kernel} is not in {path}")
    lines = line_map(binary, kernel, targs)
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
