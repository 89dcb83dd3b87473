#!/usr/bin/env bash
# kda eval end to end on a tiny checkpoint trained for 3 iterations: every bundled task
# (tests/data/eval) through the real readers and the model, the table on stdout and progress on
# stderr only, the results JSON in lm-eval's layout, --limit, batch-size invariance, save dir vs
# iter dir, MMLU k-shot, RACE from user files, and bad input. (The numbers themselves:
# tests/test_eval.c and, against lm-eval itself, tests/python/test_lm_eval_parity.py; validation
# loss: tests/cli/test_eval_val_loss.sh.)
. "$(dirname "$0")/lib.sh"
ev() { $KDA eval "$@" --set num_threads=1; }
DATA=tests/data/eval
ALL=arc_easy,hellaswag,openbookqa,piqa,winogrande,mmlu

if ! $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=3 --set lr_warmup_iters=1 --set sample_tokens=0 \
        --set save="$TMP/ck" --set num_threads=1 > "$TMP/train.log" 2>&1; then
  bad "training the tiny checkpoint failed: $(tail -3 "$TMP/train.log")"; finish; exit 1
fi
ck="$TMP/ck/$(cat "$TMP/ck/latest")"

# ---- every bundled task ----
if ev "$TMP/ck" --tasks $ALL --data-dir $DATA --limit 8 --output "$TMP/r.json" --log-samples "$TMP/s.jsonl" \
      > "$TMP/out" 2> "$TMP/err"; then ok "6 tasks scored ($(grep -c . "$TMP/s.jsonl") documents)"
else bad "eval failed: $(tail -3 "$TMP/err")"; finish; exit 1; fi
for t in arc_easy hellaswag openbookqa piqa winogrande mmlu " - stem" "  - abstract_algebra" " - other" "  - global_facts"; do
  grep -q "^|$t *|" "$TMP/out" || bad "no table row for '$t'"
done
grep -q "^| Groups" "$TMP/out" && [ "$(grep -c '|acc_norm|' "$TMP/out")" = 4 ] \
  && ok "table: a row per task and MMLU group, acc_norm for the 4 tasks that report it, a Groups table" \
  || bad "table: $(cat "$TMP/out")"
grep -q "kda eval" "$TMP/out" && bad "stdout holds progress lines" || ok "stdout is only the table"
grep -q "inputs (100%)" "$TMP/err" && ok "progress on stderr: $(grep '100%' "$TMP/err" | tail -1)" || bad "no progress: $(cat "$TMP/err")"
python3 - "$TMP/r.json" "$TMP/s.jsonl" <<'EOF' && ok "results JSON: lm-eval's keys, --limit 8 per task (per subject), acc = mean of the samples" || bad "results JSON"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config"):
    assert k in r, k
res = r["results"]
for t in ("arc_easy", "hellaswag", "openbookqa", "piqa"):
    assert {"acc,none", "acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none"} <= set(res[t]), t
assert "acc_norm,none" not in res["winogrande"] and "acc_norm,none" not in res["mmlu_abstract_algebra"]
assert r["n-samples"]["hellaswag"] == {"original": 50, "effective": 8}, r["n-samples"]["hellaswag"]
assert r["n-samples"]["mmlu_global_facts"] == {"original": 20, "effective": 8}
assert r["group_subtasks"]["mmlu"] == ["mmlu_other", "mmlu_stem"], r["group_subtasks"]
samples = [json.loads(l) for l in open(sys.argv[2])]
for t in ("arc_easy", "winogrande", "mmlu_abstract_algebra"):
    acc = [s["acc"] for s in samples if s["task"] == t]
    assert len(acc) == 8 and abs(sum(acc) / 8 - res[t]["acc,none"]) < 1e-12, t
g = [s["acc"] for s in samples if s["task"].startswith("mmlu_")]
assert abs(sum(g) / len(g) - res["mmlu"]["acc,none"]) < 1e-12
EOF

# ---- invariances ----
ev "$TMP/ck" --tasks $ALL --data-dir $DATA --limit 8 --batch-size 1 --log-samples "$TMP/s1.jsonl" --no-progress > "$TMP/out1" 2>/dev/null
python3 - "$TMP/s.jsonl" "$TMP/s1.jsonl" <<'EOF' && ok "--batch-size 1 and 8: the same log-likelihoods (rel 1e-6) and table" || bad "batch size changes the results"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) and all(x["arguments"] == y["arguments"] for x, y in zip(a, b))
w = max(abs(p - q) / abs(q) for x, y in zip(a, b) for p, q in zip(x["lls"], y["lls"]))
print(f"  (worst rel difference {w:.1e})")
assert w < 1e-6
EOF
cmp -s "$TMP/out" "$TMP/out1" || bad "tables differ between batch sizes"
ev "$ck" --tasks $ALL --data-dir $DATA --limit 8 --no-progress > "$TMP/out2" 2>/dev/null
cmp -s "$TMP/out" "$TMP/out2" && ok "save dir and $(basename "$ck") give the same table" || bad "save dir vs iter dir differ"

# ---- MMLU k-shot; RACE from user files ----
ev "$TMP/ck" --tasks mmlu_abstract_algebra --data-dir $DATA --limit 3 --num-fewshot 5 --log-samples "$TMP/k.jsonl" \
   --no-progress > "$TMP/k.out" 2>/dev/null
python3 - "$TMP/k.jsonl" <<'EOF' && ok "--num-fewshot 5: the 5 dev questions with their answers precede each question" || bad "5-shot prompt"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
ctx = s[0]["arguments"][0][0]
assert ctx.startswith("The following are multiple choice questions (with answers) about abstract algebra.\n\n"), ctx[:100]
assert ctx.count("\nAnswer:") == 6 and ctx.count("\n\n") == 6 and [a[1] for a in s[0]["arguments"]] == [" A", " B", " C", " D"]
EOF
grep -q "|  - abstract_algebra|      1|none  |     5|acc" "$TMP/k.out" || grep -q "abstract_algebra|      1|none  |     5|acc" "$TMP/k.out" \
  && ok "the table shows n-shot 5" || bad "n-shot: $(cat "$TMP/k.out")"
mkdir -p "$TMP/data/race"
cat > "$TMP/data/race/test.jsonl" <<'EOF'
{"article": "Ann has a red kite. She flies it in the park every Sunday.", "problems": "[{'answer': 'B', 'options': ['blue', 'red', 'green', 'black'], 'question': \"Ann's kite is  _  .\"}, {'answer': 'C', 'options': ['At school.', 'At home.', 'In the park.', 'On the beach.'], 'question': 'Where does Ann fly her kite?'}]"}
{"article": "Bob reads books.", "problems": [{"answer": "A", "options": ["books", "cars", "trees", "cats"], "question": "What does Bob read?"}]}
EOF
ev "$TMP/ck" --tasks race --data-dir "$TMP/data" --log-samples "$TMP/race.jsonl" --no-progress > "$TMP/race.out" 2>"$TMP/err" \
  && grep -q "^|race *|      3|" "$TMP/race.out" && grep -q "Ann's kite is red" "$TMP/race.jsonl" \
  && ok "race from user-supplied JSON lines (Python-literal and JSON problems)" || bad "race: $(cat "$TMP/err")"

# ---- bad input ----
expect_fail "no tasks" "--tasks" $KDA eval "$ck"
expect_fail "missing checkpoint" "$TMP/nope" $KDA eval "$TMP/nope" --tasks arc_easy --data-dir $DATA
expect_fail "unknown task" "lambada" $KDA eval "$ck" --tasks arc_easy,lambada --data-dir $DATA
expect_fail "tasks without --data-dir" "--data-dir" $KDA eval "$ck" --tasks arc_easy
expect_fail "task files missing: names the folder" "$TMP/data/arc_challenge" $KDA eval "$ck" --tasks arc_challenge --data-dir "$TMP/data"
expect_fail "race missing: says no RACE data ships" "ships no RACE data" $KDA eval "$ck" --tasks race --data-dir $DATA
expect_fail "no mmlu files" "mmlu/test" $KDA eval "$ck" --tasks mmlu --data-dir "$TMP/data"
expect_fail "--num-fewshot without mmlu" "MMLU only" $KDA eval "$ck" --tasks arc_easy --data-dir $DATA --num-fewshot 5
expect_fail "mmlu twice" "names both mmlu" $KDA eval "$ck" --tasks mmlu,mmlu_global_facts --data-dir $DATA
mkdir -p "$TMP/bad/piqa"
printf '{"goal": "a", "sol1": "b", "sol2": "c", "label": 0}\n{"goal": "a", "sol1": "b"\n' > "$TMP/bad/piqa/valid.jsonl"
expect_fail "malformed JSON line names file:line" "valid.jsonl:2" $KDA eval "$ck" --tasks piqa --data-dir "$TMP/bad"
mkdir -p "$TMP/bad/mmlu/test"
printf 'q,a,b,c,d,E\n' > "$TMP/bad/mmlu/test/anatomy_test.csv"
expect_fail "bad MMLU answer letter names file:line" "anatomy_test.csv:1" $KDA eval "$ck" --tasks mmlu_anatomy --data-dir "$TMP/bad"
expect_fail "batch size not a number" "--batch-size" $KDA eval "$ck" --tasks arc_easy --data-dir $DATA --batch-size many
finish
