#!/usr/bin/env bash
# kda plot: two real metrics files (and one with validation rows) to an SVG that parses as XML
# and holds the three panels, one polyline per file and series with one point per row, axis
# labels and the legend; bad input gives the usage errors (exit 2) and named-file errors (1).
. "$(dirname "$0")/lib.sh"
train() { $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=8 --set lr_warmup_iters=2 --set log_interval=2 \
            --set sample_tokens=0 --set metrics_file="$TMP/$1.jsonl" "${@:2}" > "$TMP/$1.log" 2>&1 || bad "training $1: $(tail -2 "$TMP/$1.log")"; }
train a
train b --set lr=1e-3
{ echo '{"config": "a header row without iteration"}'; cat "$TMP/b.jsonl"
  echo '{"iteration": 4, "val_loss": 5.1}'; echo '{"iteration": 8, "val_loss": 4.9}'; } > "$TMP/c.jsonl"
out=$($KDA plot "$TMP/a.jsonl=run A" "$TMP/c.jsonl" -o "$TMP/p.svg" --title "two runs" 2>&1) && ok "kda plot: $out" || bad "kda plot failed: $out"
python3 - "$TMP/p.svg" "$TMP/a.jsonl" "$TMP/c.jsonl" <<'PY' && ok "SVG: panels, series, points, axes and legend as expected" || bad "SVG check failed"
import json, sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
panels = root.findall("s:g[@class='panel']", ns)
assert [p.get("id") for p in panels] == ["loss", "lr", "tokens/s"], [p.get("id") for p in panels]
rows = [[json.loads(l) for l in open(f) if l.strip()] for f in sys.argv[2:]]
def count(rs, key): return sum(1 for r in rs if "iteration" in r and key in r)
want = {"loss": [count(r, "loss") for r in rows], "val_loss": [count(r, "val_loss") for r in rows],
        "lr": [count(r, "lr") for r in rows], "tokens_per_s": [count(r, "tokens_per_s") for r in rows]}
for key, counts in want.items():
    lines = root.findall(f".//s:polyline[@class='{key}']", ns)
    got = [len(l.get("points").split()) for l in lines]
    assert got == [c for c in counts if c], (key, got, counts)
for p in panels:
    texts = [t.text for t in p.findall("s:text", ns)]
    assert "iteration" in texts and len(p.findall("s:line[@class='xtick']", ns)) >= 3, texts
    assert len(p.findall("s:line[@class='ytick']", ns)) >= 3
legend = [t.text for t in root.findall(".//s:g[@class='legend']/s:text", ns)]
assert legend == ["run A", "c.jsonl"], legend
assert root.find("s:text", ns).text == "two runs"
print("svg ok:", {k: v for k, v in want.items()})
PY
expect_fail "no output file: usage error" "no output file" $KDA plot "$TMP/a.jsonl"
[ "$($KDA plot "$TMP/a.jsonl" >/dev/null 2>&1; echo $?)" = 2 ] && ok "usage error exits 2" || bad "usage error exit code"
expect_fail "unknown option" "unknown option '--bogus'" $KDA plot "$TMP/a.jsonl" -o "$TMP/x.svg" --bogus
echo 'not json' > "$TMP/bad.jsonl"
expect_fail "a line that is not JSON names file and line" "bad.jsonl' line 1 is not a JSON object" $KDA plot "$TMP/bad.jsonl" -o "$TMP/x.svg"
expect_fail "a missing file is named" "cannot open metrics file '$TMP/none.jsonl'" $KDA plot "$TMP/none.jsonl" -o "$TMP/x.svg"
[ ! -e "$TMP/x.svg" ] && ok "no SVG left behind by a failed plot" || bad "a failed plot left $TMP/x.svg"
# an output that is an input, or a folder: refused before anything is written, no OUT.tmp left
cp "$TMP/a.jsonl" "$TMP/keep.jsonl"
expect_fail "-o naming an input" "is, or holds, the input" $KDA plot "$TMP/a.jsonl" -o "$TMP/a.jsonl"
cmp -s "$TMP/a.jsonl" "$TMP/keep.jsonl" && ok "  the metrics file is unchanged" || bad "  the metrics file was overwritten"
mkdir -p "$TMP/outdir"
expect_fail "-o naming a folder" "is a folder" $KDA plot "$TMP/a.jsonl" -o "$TMP/outdir"
[ ! -e "$TMP/outdir.tmp" ] && ok "  no outdir.tmp left" || bad "  left $TMP/outdir.tmp"
expect_fail "a metrics file that is a folder" "metrics file '$TMP/outdir' is a folder" $KDA plot "$TMP/outdir" -o "$TMP/x.svg"
finish
