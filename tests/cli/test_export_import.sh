#!/usr/bin/env bash
# kda export / kda import on the command line: fp32 round trip (export -> import -> export is
# byte-identical), bf16 by default, --force, and one clear error for each bad input: missing
# checkpoint, existing OUT_DIR, a folder without model.safetensors, model_type "llama", a
# shape mismatch, an lm_head.weight that differs from the embedding, a sharded index naming a
# missing shard, a tensor the model does not have, a non-null attnres_block_size, importing
# into a SAVE_DIR that holds a checkpoint. Failed commands leave nothing behind.
# (Numerical parity with transformers + FLA: tests/python/test_export_import.py.)
. "$(dirname "$0")/lib.sh"

$KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=2 --set lr_warmup_iters=1 --set sample_tokens=0 \
  --set log_interval=1 --set save="$TMP/ck" > "$TMP/train.log" 2>&1 || { bad "tiny training run: $(tail -3 "$TMP/train.log")"; finish; exit 1; }

# ---- helpers: read a safetensors header, write a one-tensor safetensors file -------------------
st_header() { # file -> its JSON header
  local n; n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  dd if="$1" bs=1 skip=8 count="$n" status=none
}
le64() { # n -> 8 bytes little-endian
  local n=$1 i s=""
  for i in 0 1 2 3 4 5 6 7; do s+=$(printf '\\x%02x' $(( (n >> (8 * i)) & 255 ))); done
  printf "$s"
}
st_one() { # out name dtype shape-json data-file
  local h="{\"$2\":{\"dtype\":\"$3\",\"shape\":$4,\"data_offsets\":[0,$(stat -c %s "$5")]}}"
  while [ $(( ${#h} % 8 )) -ne 0 ]; do h+=" "; done
  { le64 ${#h}; printf '%s' "$h"; cat "$5"; } > "$1"
}
tensor_names() { st_header "$1" | grep -o '"model\.[^"]*"' | tr -d '"'; }
index_json() { # file-of-"name shard"-lines -> model.safetensors.index.json text
  printf '{"metadata": {}, "weight_map": {'
  awk 'NR > 1 { printf ", " } { printf "\"%s\": \"%s\"", $1, $2 }' "$1"
  printf '}}\n'
}
leftovers() { ls -a "$TMP" | grep -E '\.(tmp|old)-' ; }

# ---- round trips -------------------------------------------------------------------------------
$KDA export "$TMP/ck" "$TMP/e32" --dtype fp32 > /dev/null || bad "export --dtype fp32"
$KDA import "$TMP/e32" "$TMP/i32" > /dev/null || bad "import of the fp32 export"
$KDA export "$TMP/i32" "$TMP/e32b" --dtype fp32 > /dev/null || bad "export of the imported checkpoint"
if cmp -s "$TMP/e32/model.safetensors" "$TMP/e32b/model.safetensors" && cmp -s "$TMP/e32/config.json" "$TMP/e32b/config.json"; then
  ok "fp32: export -> import -> export is byte-identical (model.safetensors $(stat -c %s "$TMP/e32/model.safetensors") bytes, config.json)"
else bad "fp32 round trip differs: $(cmp "$TMP/e32/model.safetensors" "$TMP/e32b/model.safetensors"; diff "$TMP/e32/config.json" "$TMP/e32b/config.json" | head -4)"; fi
if cmp -s "$TMP/ck/$(cat "$TMP/ck/latest")/model.safetensors" "$TMP/i32/iter_0000000/model.safetensors"; then
  ok "the imported checkpoint's model.safetensors is the trained checkpoint's, byte for byte"
else bad "imported weights differ from the trained checkpoint's"; fi

$KDA export "$TMP/ck" "$TMP/e16" > /dev/null || bad "export (default dtype)"
h16=$(st_header "$TMP/e16/model.safetensors"); h32=$(st_header "$TMP/e32/model.safetensors")
n16=$(grep -o '"dtype":"BF16"' <<<"$h16" | wc -l); n32=$(grep -o '"dtype":"F32"' <<<"$h32" | wc -l)
other16=$(grep -o '"dtype":"[A-Z0-9]*"' <<<"$h16" | grep -vc BF16)
s16=$(stat -c %s "$TMP/e16/model.safetensors"); s32=$(stat -c %s "$TMP/e32/model.safetensors")
if [ "$n16" -gt 0 ] && [ "$n16" = "$n32" ] && [ "$other16" = 0 ] && grep -q '"torch_dtype": "bfloat16"' "$TMP/e16/config.json" \
   && [ $(( 2 * s16 )) -lt $(( s32 + 8192 )) ] && [ $(( 2 * s16 )) -gt $(( s32 - 8192 )) ]; then
  ok "default export is bf16: $n16 BF16 tensors, torch_dtype bfloat16, $s16 bytes (fp32: $s32)"
else bad "default export: $n16 BF16 / $n32 F32 tensors, $other16 others, $s16 vs $s32 bytes, $(grep torch_dtype "$TMP/e16/config.json")"; fi
$KDA import "$TMP/e16" "$TMP/i16" > /dev/null && $KDA export "$TMP/i16" "$TMP/e16b" > /dev/null || bad "bf16 import / export"
cmp -s "$TMP/e16/model.safetensors" "$TMP/e16b/model.safetensors" && ok "bf16: export -> import -> export is byte-identical" \
  || bad "bf16 round trip differs: $(cmp "$TMP/e16/model.safetensors" "$TMP/e16b/model.safetensors")"

# ---- --force -----------------------------------------------------------------------------------
cp -r "$TMP/e16" "$TMP/out"
expect_fail "export onto an existing OUT_DIR" "exists" $KDA export "$TMP/ck" "$TMP/out" --dtype fp32
cmp -s "$TMP/e16/model.safetensors" "$TMP/out/model.safetensors" && ok "the refused export left OUT_DIR untouched" || bad "refused export changed OUT_DIR"
if $KDA export "$TMP/ck" "$TMP/out" --dtype fp32 --force > /dev/null 2>&1 && cmp -s "$TMP/e32/model.safetensors" "$TMP/out/model.safetensors" \
   && grep -q '"torch_dtype": "float32"' "$TMP/out/config.json" && [ -z "$(leftovers)" ]; then
  ok "--force replaces OUT_DIR (bf16 -> fp32), no temporaries left"
else bad "--force: $(ls -a "$TMP"; grep torch_dtype "$TMP/out/config.json")"; fi
touch "$TMP/out/notes.txt"
err=$($KDA export "$TMP/ck" "$TMP/out" --force 2>&1 >/dev/null)
if [ -f "$TMP/out/model.safetensors" ] && [ ! -e "$TMP/out/notes.txt" ] && grep -q "other files" <<<"$err" \
   && [ -f "$(ls -d "$TMP"/out.old-*/notes.txt | head -1)" ]; then
  ok "--force over a folder with a foreign file: says where the file went ($err)"
else bad "--force with a foreign file: '$err', $(ls -a "$TMP")"; fi
rm -rf "$TMP"/out.old-*

# ---- errors ------------------------------------------------------------------------------------
expect_fail "export of a missing checkpoint" "holds no checkpoint" $KDA export "$TMP/no-such-run" "$TMP/x1"
[ ! -e "$TMP/x1" ] && ok "no OUT_DIR after the failed export" || bad "failed export left $TMP/x1"
expect_fail "export with an unknown --dtype" "--dtype 'fp8'" $KDA export "$TMP/ck" "$TMP/x1" --dtype fp8

mkdir "$TMP/nost"; cp "$TMP/e32/config.json" "$TMP/nost/"
expect_fail "import of a folder without model.safetensors" "neither model.safetensors" $KDA import "$TMP/nost" "$TMP/x2"
expect_fail "import of a folder without config.json" "config.json' is missing" $KDA import "$TMP/ck" "$TMP/x2"

mkdir "$TMP/llama"; sed 's/"model_type": "kda"/"model_type": "llama"/' "$TMP/e32/config.json" > "$TMP/llama/config.json"
cp "$TMP/e32/model.safetensors" "$TMP/llama/"
expect_fail "import of a model_type llama folder" "model_type 'llama'" $KDA import "$TMP/llama" "$TMP/x3"

mkdir "$TMP/attnres"; sed 's/"attn": null/"attnres_block_size": 2, "attn": null/' "$TMP/e32/config.json" > "$TMP/attnres/config.json"
cp "$TMP/e32/model.safetensors" "$TMP/attnres/"
expect_fail "import with attnres_block_size set" "attnres_block_size must be null" $KDA import "$TMP/attnres" "$TMP/x3"

mkdir "$TMP/shape"; sed 's/"hidden_size": 128/"hidden_size": 64/' "$TMP/e32/config.json" > "$TMP/shape/config.json"
cp "$TMP/e32/model.safetensors" "$TMP/shape/"
expect_fail "import with shapes that do not match config.json" "has shape [256, 128], but config.json describes [256, 64]" \
  $KDA import "$TMP/shape" "$TMP/x4"

# sharded folders: model.safetensors renamed to a shard, plus a second shard and an index
tensor_names "$TMP/e32/model.safetensors" | awk '{ print $1, "model-00001-of-00002.safetensors" }' > "$TMP/map"
[ "$(wc -l < "$TMP/map")" = "$n32" ] || bad "tensor names from the header: $(wc -l < "$TMP/map") of $n32"
sharded() { # dir: the fp32 export as shard 1 of 2 (shard 2 and the index are added by the caller)
  mkdir "$1"; cp "$TMP/e32/config.json" "$1/"; cp "$TMP/e32/model.safetensors" "$1/model-00001-of-00002.safetensors"
}
head -c $(( 256 * 128 * 4 )) /dev/zero > "$TMP/zeros.bin"

sharded "$TMP/head_ok"   # lm_head.weight = the embedding's bytes, in shard 2
off=$(st_header "$TMP/e32/model.safetensors" | grep -o '"model.embeddings.weight":{[^}]*}' | grep -o 'data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
hl=$(od -An -tu8 -N8 "$TMP/e32/model.safetensors" | tr -d ' ')
dd if="$TMP/e32/model.safetensors" bs=4096 iflag=skip_bytes,count_bytes skip=$(( 8 + hl + off )) count=$(( 256 * 128 * 4 )) status=none > "$TMP/emb.bin"
st_one "$TMP/head_ok/model-00002-of-00002.safetensors" lm_head.weight F32 '[256,128]' "$TMP/emb.bin"
{ cat "$TMP/map"; echo "lm_head.weight model-00002-of-00002.safetensors"; } > "$TMP/map_head"
index_json "$TMP/map_head" > "$TMP/head_ok/model.safetensors.index.json"
if $KDA import "$TMP/head_ok" "$TMP/i_head" > "$TMP/o.log" 2>&1 && \
   cmp -s "$TMP/i32/iter_0000000/model.safetensors" "$TMP/i_head/iter_0000000/model.safetensors"; then
  ok "sharded folder with an explicit lm_head.weight equal to the embedding imports to the same checkpoint"
else bad "sharded + explicit head: $(cat "$TMP/o.log")"; fi

sharded "$TMP/head_bad"  # lm_head.weight all zeros: an untied head
st_one "$TMP/head_bad/model-00002-of-00002.safetensors" lm_head.weight F32 '[256,128]' "$TMP/zeros.bin"
index_json "$TMP/map_head" > "$TMP/head_bad/model.safetensors.index.json"
expect_fail "import with an lm_head.weight that differs from the embedding" "differs from model.embeddings.weight" \
  $KDA import "$TMP/head_bad" "$TMP/x5"

sharded "$TMP/missing"   # the index sends model.norm.weight to a shard that is not there
sed 's/^model\.norm\.weight .*/model.norm.weight model-00002-of-00002.safetensors/' "$TMP/map" > "$TMP/map_missing"
index_json "$TMP/map_missing" > "$TMP/missing/model.safetensors.index.json"
expect_fail "import of a sharded index naming a missing shard" "names shard 'model-00002-of-00002.safetensors', which is missing" \
  $KDA import "$TMP/missing" "$TMP/x6"

sharded "$TMP/extra"     # a tensor FLA's KDAForCausalLM of this config does not have
head -c $(( 128 * 4 )) /dev/zero > "$TMP/z128.bin"
st_one "$TMP/extra/model-00002-of-00002.safetensors" model.layers.0.attn_res_proj.weight F32 '[1,128]' "$TMP/z128.bin"
{ cat "$TMP/map"; echo "model.layers.0.attn_res_proj.weight model-00002-of-00002.safetensors"; } > "$TMP/map_extra"
index_json "$TMP/map_extra" > "$TMP/extra/model.safetensors.index.json"
expect_fail "import of a folder with an unknown tensor" "model.layers.0.attn_res_proj.weight" $KDA import "$TMP/extra" "$TMP/x7"

nothing=1; for d in x2 x3 x4 x5 x6 x7; do [ -e "$TMP/$d" ] && nothing=0; done
[ $nothing = 1 ] && [ -z "$(leftovers)" ] && ok "failed imports left no SAVE_DIR and no temporaries" || bad "leftovers: $(ls "$TMP")"

expect_fail "import into a SAVE_DIR that holds a checkpoint" "already holds a checkpoint" $KDA import "$TMP/e32" "$TMP/ck"

# ---- OUT_DIR that is, or holds, the checkpoint: refused even with --force, nothing moved --------
cp -r "$TMP/ck" "$TMP/self"; it=$(ls -d "$TMP"/self/iter_* | tail -1)
expect_fail "export --force onto its own checkpoint" "is, or holds, the input" $KDA export "$it" "$it" --force
expect_fail "export --force onto its save folder" "is, or holds, the input" $KDA export "$TMP/self" "$TMP/self" --force
[ -f "$it/model.safetensors" ] && [ -z "$(ls -d "$TMP"/self*.old-* "$it".old-* 2>/dev/null)" ] &&
  ok "the checkpoint is untouched" || bad "the refused exports moved or deleted files: $(ls "$it")"

# ---- --tokenizer: the named file itself (any file name) or a folder's tokenizer.json; a byte-level
# checkpoint, a file that is not a tokenizer or a missing one refused before anything is written ----
$KDA train configs/tiny.yaml --device cpu --set train_iters=1 --set lr_warmup_iters=0 --set sample_tokens=0 \
  --set data_format=text --set train_data_path=data/tinyshakespeare.txt --set eval_iters=0 \
  --set num_hidden_layers=1 --set save="$TMP/ckl" > "$TMP/trainl.log" 2>&1 ||
  bad "tiny Llama-tokenizer run: $(tail -3 "$TMP/trainl.log")"
cp data/tokenizer/llama3/tokenizer.json "$TMP/mytok.json"
$KDA export "$TMP/ckl" "$TMP/tk1" --tokenizer "$TMP/mytok.json" > /dev/null &&
  cmp -s "$TMP/tk1/tokenizer.json" "$TMP/mytok.json" && ok "--tokenizer FILE: copied as tokenizer.json" ||
  bad "--tokenizer FILE: $(ls "$TMP/tk1" 2>&1)"
$KDA export "$TMP/ckl" "$TMP/tk2" --tokenizer data/tokenizer/llama3 > /dev/null &&
  cmp -s "$TMP/tk2/tokenizer.json" data/tokenizer/llama3/tokenizer.json && ok "--tokenizer FOLDER: its tokenizer.json" ||
  bad "--tokenizer FOLDER: $(ls "$TMP/tk2" 2>&1)"
echo "not: [a tokenizer" > "$TMP/bad.json"
expect_fail "--tokenizer naming a file that is not a tokenizer" "$TMP/bad.json" $KDA export "$TMP/ckl" "$TMP/tk3" --tokenizer "$TMP/bad.json"
expect_fail "--tokenizer naming a missing file" "--tokenizer '$TMP/none.json' is not readable" \
  $KDA export "$TMP/ckl" "$TMP/tk3" --tokenizer "$TMP/none.json"
expect_fail "--tokenizer with a byte-level checkpoint" "byte-level" $KDA export "$TMP/ck" "$TMP/tk3" --tokenizer "$TMP/mytok.json"
[ ! -e "$TMP/tk3" ] && [ -z "$(leftovers)" ] && ok "the refused exports left nothing" || bad "left: $(ls "$TMP")"
[ "$(cat "$TMP/ck/latest")" = iter_0000002 ] && ok "the run's latest still names iter_0000002" || bad "latest changed: $(cat "$TMP/ck/latest")"
finish
