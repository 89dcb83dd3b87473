#!/usr/bin/env bash
# check_sizes.sh — the size rule of DEVELOPERS.md: no function over 100 lines and no file over 800
# lines in src/ (C sources and headers, the host code of the CUDA files). Device code is exempt: a
# CUDA kernel (`__global__`) or a `__device__` function (not `__host__ __device__`) takes the shape
# of the GPU work it does, registers and shared memory included, not this rule's.
#
# usage: tools/check_sizes.sh [--max-function N] [--max-file N] [PATH...]   (default: src)
# PATH: files or folders (searched for *.c *.h *.cu *.cuh). Prints one line per violation
# (`file:line: function NAME is N lines (limit 100)`, `file: N lines (limit 800)`), then a summary
# with the longest function and the longest file; exit status 1 when anything is over, else 0.
#
# A function is a top-level brace block whose text before the `{` has a `(` and is not a struct,
# union, enum, class, typedef or initializer (`=`); it runs from the first line of its signature
# to its closing brace. Comments, string and character literals and preprocessor lines are skipped;
# `extern "C" {` and `namespace x {` blocks are looked into.
set -u
max_fn=100 max_file=800
paths=()
while [ $# -gt 0 ]; do
  case $1 in
    --max-function) max_fn=$2; shift 2 ;;
    --max-file) max_file=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) paths+=("$1"); shift ;;
  esac
done
[ ${#paths[@]} -gt 0 ] || { cd "$(dirname "$0")/.." && paths=(src); }
mapfile -d '' files < <(find "${paths[@]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
  -print0 | LC_ALL=C sort -z)
[ ${#files[@]} -gt 0 ] || { echo "check_sizes: no C or CUDA files under ${paths[*]}" >&2; exit 1; }

awk -v max_fn="$max_fn" -v max_file="$max_file" '
function reset_header() { header = ""; hstart = 0 }
# The line without comments and without the insides of string and character literals.
function strip(s,    out, i, n, c, q) {
    out = ""; n = length(s); i = 1
    while (i <= n) {
        c = substr(s, i, 1)
        if (in_comment) {
            if (substr(s, i, 2) == "*/") { in_comment = 0; i += 2 } else i++
            continue
        }
        if (substr(s, i, 2) == "/*") { in_comment = 1; i += 2; out = out " "; continue }
        if (substr(s, i, 2) == "//") break
        if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= n && substr(s, i, 1) != q) { if (substr(s, i, 1) == "\\") i++; i++ }
            i++; out = out q q; continue
        }
        out = out c; i++
    }
    return out
}
# The name of the function a signature declares: the identifier before its last top-level "(",
# the parameter list (attribute macros before the name, KDA_PRINTF(3, 4), are passed over).
function fn_name(h,    i, c, d, at, pre) {
    d = 0; at = 0
    for (i = 1; i <= length(h); i++) {
        c = substr(h, i, 1)
        if (c == "(") { if (d == 0) at = i; d++ } else if (c == ")") d--
    }
    pre = substr(h, 1, at - 1)
    sub(/[ \t]+$/, "", pre)
    return match(pre, /[A-Za-z_][A-Za-z_0-9:~]*$/) ? substr(pre, RSTART, RLENGTH) : "?"
}
function is_function(h,    t) {
    if (h !~ /\(/) return 0
    t = h  # "=" outside parentheses: an initializer (inside: a default argument)
    while (gsub(/\([^()]*\)/, "", t)) {}
    if (t ~ /=/ && t !~ /operator/) return 0
    if (h ~ /^[ \t]*(template[ \t]*<[^>]*>[ \t]*)?(typedef|struct|union|enum|class)[ \t(]/) return 0
    return 1
}
function is_device_code(h) {
    return h ~ /__global__/ || (h ~ /__device__/ && h !~ /__host__/)
}
FNR == 1 {
    if (prev_file != "") end_file()
    prev_file = FILENAME; in_comment = 0; in_pp = 0; depth = 0; transparent = 0; in_fn = 0; reset_header()
}
function end_file() {
    n_files++
    if (file_lines > max_file) { printf "%s: %d lines (limit %d)\n", prev_file, file_lines, max_file; bad++ }
    if (file_lines > longest_file) { longest_file = file_lines; longest_file_name = prev_file }
}
{
    file_lines = FNR
    line = $0
    if (in_pp) { in_pp = line ~ /\\$/; next }
    if (!in_comment && line ~ /^[ \t]*#/) { in_pp = line ~ /\\$/; next }
    s = strip(line)
    n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "{") {
            if (depth == 0) {
                if (header ~ /^[ \t]*extern[ \t]*""[ \t]*$/ || header ~ /^[ \t]*namespace([ \t]+[A-Za-z_0-9]*)?[ \t]*$/) {
                    transparent++; reset_header(); continue
                }
                in_fn = is_function(header)
                if (in_fn) { fn_start = hstart ? hstart : FNR; fn = fn_name(header); fn_device = is_device_code(header) }
                reset_header()
            }
            depth++
        } else if (c == "}") {
            if (depth == 0) { if (transparent > 0) transparent--; reset_header(); continue }
            depth--
            if (depth == 0 && in_fn) {
                len = FNR - fn_start + 1; in_fn = 0; n_fns++
                if (fn_device) { n_device++; continue }
                if (len > max_fn) { printf "%s:%d: function %s is %d lines (limit %d)\n", FILENAME, fn_start, fn, len, max_fn; bad++ }
                if (len > longest_fn) { longest_fn = len; longest_fn_name = fn " (" FILENAME ":" fn_start ")" }
            }
            if (depth == 0) reset_header()
        } else if (depth == 0) {
            if (c == ";") { reset_header(); continue }
            if (c !~ /[ \t]/ && !hstart) hstart = FNR
            header = header c
        }
    }
    if (depth == 0 && hstart) header = header " "
}
END {
    if (prev_file != "") end_file()
    printf "check_sizes: %d files, %d functions (%d of device code, exempt); longest function %s, %d lines (limit %d); longest file %s, %d lines (limit %d)%s\n", \
        n_files, n_fns, n_device, longest_fn_name, longest_fn, max_fn, longest_file_name, longest_file, max_file, \
        bad ? sprintf(": %d over", bad) : ""
    exit bad ? 1 : 0
}' "${files[@]}"
