#!/usr/bin/env bash
# kda encode / kda decode: JSON lines in and out, flags, and clear errors naming the line.
. "$(dirname "$0")/lib.sh"
expect_out() { # description, expected stdout, stdin, command...
  local what=$1 want=$2 in=$3; shift 3
  local got; got=$(printf '%s' "$in" | "$@" 2>&1)
  if [ "$got" = "$want" ]; then ok "$what"; else bad "$what: got '$got', wanted '$want'"; fi
}
expect_out "encode Hello, world!" '{"ids": [9906, 11, 1917, 0]}' '{"text": "Hello, world!"}' $KDA encode
expect_out "encode --bos" '{"ids": [128000, 9906, 11, 1917, 0]}' '{"text": "Hello, world!"}' $KDA encode --bos
expect_out "special string -> id" '{"ids": [64, 128009]}' '{"text": "a<|eot_id|>"}' $KDA encode
expect_out "--no-special: special string is text" '{"ids": [64, 27, 91, 68, 354, 851, 91, 29]}' \
  '{"text": "a<|eot_id|>"}' $KDA encode --no-special
expect_out "several lines, empty text" $'{"ids": [9906]}\n{"ids": []}' $'{"text": "Hello"}\n{"text": ""}\n' $KDA encode
expect_out "invalid UTF-8 in a string reads as U+FFFD" '{"ids": [64, 10178]}' $'{"text": "a\xff\xfe"}' $KDA encode
expect_out "decode" '{"text": "Hello, world!"}' '{"ids": [9906, 11, 1917, 0]}' $KDA decode
expect_out "decode escapes JSON" '{"text": "\"\\\n\u0000"}' '{"ids": [1, 59, 198, 188]}' $KDA decode
expect_out "decode of a cut character gives U+FFFD" '{"text": " �"}' '{"ids": [10447]}' $KDA decode
expect_out "decode --skip-special" '{"text": "Hi"}' '{"ids": [128000, 13347, 128001]}' $KDA decode --skip-special
printf '{"text": "ok"}\n{"text": "broken\n' > "$TMP/bad.jsonl"
expect_fail "bad JSON names the line" "stdin line 2" sh -c "$KDA encode < $TMP/bad.jsonl"
expect_fail "missing text field" 'no string field "text"' sh -c "echo '{\"txt\": 1}' | $KDA encode"
expect_fail "not an object" "expected a JSON object" sh -c "echo '[1]' | $KDA encode"
expect_fail "id out of range" "ids[1] is not a token id" sh -c "echo '{\"ids\": [1, 128256]}' | $KDA decode"
expect_fail "non-integer id" "ids[0]" sh -c "echo '{\"ids\": [\"a\"]}' | $KDA decode"
expect_fail "unknown option" "unknown option '--frob'" $KDA encode --frob
expect_fail "missing tokenizer file names it" "$TMP/nope.json" sh -c "echo '{}' | $KDA encode --tokenizer $TMP/nope.json"
printf '{"model": {"type": "WordPiece"}}' > "$TMP/wp.json"
expect_fail "unsupported tokenizer says what" "model must be BPE" sh -c "echo '{}' | $KDA encode --tokenizer $TMP/wp.json"
finish
