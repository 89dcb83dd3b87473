#!/usr/bin/env bash
# Checkpoints carry a CRC-32 per tensor file (state.json "crc32"), verified at load: a flipped
# byte is an error naming the file. Old checkpoints without checksums still load, with one
# warning. After a non-finite loss or gradient the message names the last checkpoint and says
# whether its weights are finite.
. "$(dirname "$0")/lib.sh"
T="$KDA train configs/tiny-bytes.yaml --device cpu --set sample_tokens=0 --set lr_warmup_iters=0"
S="$TMP/s"
$T --set save="$S" --set train_iters=1 >/dev/null 2>&1 && ok "saved a checkpoint" || { bad "training failed"; finish; exit 1; }
C="$S/iter_0000001"
grep -q '"model.safetensors": "[0-9a-f]\{8\}"' "$C/state.json" && ok "state.json has the CRC-32 of model.safetensors" || bad "no crc32 in state.json"
out=$($T --set save="$S" --set load="$S" --set train_iters=2 2>&1) && ok "an intact checkpoint loads" || bad "resume failed: $out"
grep -q "warning" <<<"$out" && bad "  warning on an intact checkpoint: $out" || ok "  without a warning"
# flip one byte in the middle of the weights
cp -r "$C" "$TMP/bad"; f="$TMP/bad/model.safetensors"; n=$(stat -c %s "$f"); off=$((n / 2))
b=$(od -An -tu1 -j $off -N1 "$f" | tr -d ' '); printf "$(printf '\\%03o' $(( (b ^ 1) & 255 )))" | dd of="$f" bs=1 seek=$off conv=notrunc status=none
expect_fail "a flipped byte in the weights" "checkpoint file '$f' is corrupt" $T --set load="$TMP/bad" --set train_iters=3
expect_fail "generate refuses it too" "'$f' is corrupt" $KDA generate "$TMP/bad" --tokenizer bytes --prompt hi --max-new-tokens 2
# an old checkpoint (no checksums) loads with one warning
cp -r "$C" "$TMP/old"; python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); del d['crc32']; del d['weights_finite']; json.dump(d, open(p,'w'))" "$TMP/old/state.json"
out=$($T --set load="$TMP/old" --set train_iters=3 2>&1) && ok "a checkpoint without checksums loads" || bad "old checkpoint refused: $out"
[ "$(grep -c 'has no checksums' <<<"$out")" -eq 1 ] && ok "  with one warning that nothing is verified" || bad "  warnings: $(grep -c 'has no checksums' <<<"$out")"
# non-finite: the message names the last checkpoint and its state
rm -rf "$TMP/n"
expect_fail "non-finite after a save" "the last checkpoint is $TMP/n/iter_0000001, its weights are finite" \
  $T --set save="$TMP/n" --set save_interval=1 --set train_iters=5 --set lr=1e10 --set clip_grad=0
python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['weights_finite']=False; json.dump(d, open(p,'w'))" "$TMP/n/iter_0000001/state.json"
expect_fail "non-finite, last checkpoint not finite" "its weights are NOT finite: use an earlier one" \
  $T --set save="$TMP/n2" --set load="$TMP/n/iter_0000001" --set no_load_optim=true --set finetune=true --set train_iters=5 --set lr=1e30 --set clip_grad=0
expect_fail "non-finite without checkpoints" "no checkpoint was saved or loaded by this run" $T --set train_iters=5 --set lr=1e30 --set clip_grad=0
# state.json's counters must not be negative; weights that are not finite are refused at load
cp -r "$C" "$TMP/neg"; python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['iteration']=-5; json.dump(d, open(p,'w'))" "$TMP/neg/state.json"
expect_fail "a negative iteration in state.json" "must not be negative" $T --set load="$TMP/neg" --set train_iters=3
cp -r "$C" "$TMP/nan"; python3 - "$TMP/nan" <<'PY'
import json, struct, sys
d = sys.argv[1]; f = d + "/model.safetensors"
b = bytearray(open(f, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
b[8 + n:8 + n + 4] = struct.pack("<f", float("nan")); open(f, "wb").write(bytes(b))
s = json.load(open(d + "/state.json")); s.pop("crc32", None); json.dump(s, open(d + "/state.json", "w"))
PY
expect_fail "weights with a NaN (no checksums)" "hold a non-finite value" $T --set load="$TMP/nan" --set train_iters=3
expect_fail "generate refuses them too" "hold a non-finite value" $KDA generate "$TMP/nan" --prompt hi --max-new-tokens 2
finish
