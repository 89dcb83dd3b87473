# lib.sh — shell helpers of the device scripts that compare training runs (same_bits.sh,
# nccl_one_rank.sh); sourced, not run.

# The training rows' losses of a metrics file, space-separated (a metrics file also holds its
# run's header and validation rows, which have no "loss").
loss() { grep '"loss":' "$1" | sed 's/.*"loss": \([0-9.e+-]*\),.*/\1/' | tr '\n' ' '; }

# Whether two checkpoint directories hold byte-identical weights and Adam moments; names each file
# that differs or is missing ("  differs: LABEL/FILE"). Usage: same_checkpoint DIR_A DIR_B LABEL
same_checkpoint() {
  local f ok=0
  for f in model.safetensors optim.exp_avg.safetensors optim.exp_avg_sq.safetensors; do
    [ -s "$1/$f" ] && cmp -s "$1/$f" "$2/$f" || { echo "  differs: $3/$f"; ok=1; }
  done
  return $ok
}
