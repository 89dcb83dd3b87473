#!/usr/bin/env bash
# A checkpoint made in the repo works from any folder: generate and export find its tokenizer
# (config.yaml in a checkpoint names it by absolute path), export always includes the tokenizer
# (a tokenizer it cannot read is an error, not a silent omission) and generation_config.json.
. "$(dirname "$0")/lib.sh"
K=$(cd "$(dirname "$KDA")" && pwd)/$(basename "$KDA")
head -c 20000 data/tinyshakespeare.txt >"$TMP/small.txt"
$KDA tokenize --quiet --input "$TMP/small.txt" --text-docs block --output-prefix "$TMP/d" 2>/dev/null || bad "tokenize failed"
$KDA train configs/tiny.yaml --device cpu --set train_data_path="[$TMP/d]" --set hidden_size=32 --set num_hidden_layers=1 \
  --set num_heads=2 --set head_dim=16 --set intermediate_size=64 --set seq_length=32 --set micro_batch_size=2 --set global_batch_size=2 \
  --set train_iters=1 --set lr_warmup_iters=0 --set sample_tokens=0 --set save="$TMP/s" >"$TMP/train.log" 2>&1 \
  && ok "a checkpoint with the Llama 3 tokenizer (relative tokenizer_model)" || { bad "training failed: $(tail -3 "$TMP/train.log")"; finish; exit 1; }
mkdir -p "$TMP/elsewhere"; cd "$TMP/elsewhere"
out=$($K generate "$TMP/s" --prompt "Hello" --max-new-tokens 3 2>&1) && ok "generate from another folder" || bad "generate from another folder: $out"
out=$($K export "$TMP/s" "$TMP/e" 2>&1) && ok "export from another folder" || bad "export: $out"
[ -f "$TMP/e/tokenizer.json" ] && ok "  the export includes tokenizer.json" || bad "  no tokenizer.json in the export: $(ls "$TMP/e")"
[ -f "$TMP/e/generation_config.json" ] && ok "  and generation_config.json" || bad "  no generation_config.json"
# a checkpoint naming a tokenizer that is gone: export refuses rather than leaving it out
cp -r "$TMP/s/iter_0000001" "$TMP/gone"
sed -i "s#^tokenizer_model: .*#tokenizer_model: \"$TMP/no/tokenizer.json\"#" "$TMP/gone/config.yaml"
expect_fail "export with an unreadable tokenizer" "tokenizer_model '$TMP/no/tokenizer.json' is not readable" $K export "$TMP/gone" "$TMP/e2"
[ ! -e "$TMP/e2" ] && ok "  no half export left" || bad "  '$TMP/e2' was created"
cd - >/dev/null
$KDA export "$TMP/gone" "$TMP/e3" --tokenizer data/tokenizer/llama3/tokenizer.json >/dev/null 2>&1 && [ -f "$TMP/e3/tokenizer.json" ] \
  && ok "export --tokenizer PATH includes the given tokenizer" || bad "export --tokenizer failed"
# a byte-level checkpoint (no ids for bos/eos) still gets generation_config.json, as --help says
$KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=1 --set lr_warmup_iters=0 --set sample_tokens=0 --set save="$TMP/b" >/dev/null 2>&1
$KDA export "$TMP/b" "$TMP/eb" >/dev/null 2>&1 && [ -f "$TMP/eb/generation_config.json" ] && ok "byte model: generation_config.json written" || bad "byte model: no generation_config.json"
finish
