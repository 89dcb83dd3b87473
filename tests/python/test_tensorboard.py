"""kda's TensorBoard event files, read by the tensorboard package itself.

build/tools/tb_write writes scalars with src/train/tensorboard.c under Megatron's tag names;
tensorboard's EventAccumulator (what TensorBoard's server uses) must list the same tags, steps
and values (float32), and the file must be found by TensorBoard's own directory scan.
"""
import os
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing import io_wrapper

BUILD = os.environ.get("KDA_BUILD", "build")


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        run = os.path.join(d, "runs", "kda")
        want = {"lm loss": [(1, 11.97), (2, 10.5), (3, 9.25)],
                "learning-rate": [(1, 1e-6), (2, 2e-6), (3, 3e-6)],
                "lm loss validation": [(3, 9.5)]}
        args = [os.path.join(BUILD, "tools", "tb_write"), run]
        for tag, pts in want.items():
            for s, v in pts:
                args += [tag, str(s), repr(v)]
        path = subprocess.check_output(args, text=True).strip()
        found = list(io_wrapper.GetLogdirSubdirectories(d))
        ok = run in found
        print(("  ok   " if ok else "  FAIL ") + f" TensorBoard finds the run folder ({found})")
        fails += not ok
        acc = EventAccumulator(run)
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        ok = tags == sorted(want)
        print(("  ok   " if ok else "  FAIL ") + f" scalar tags {tags}")
        fails += not ok
        for tag, pts in want.items():
            got = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags else []
            import numpy as np
            exp = [(s, float(np.float32(v))) for s, v in pts]
            ok = got == exp
            print(("  ok   " if ok else "  FAIL ") + f" {tag!r}: {got}")
            fails += not ok
        print(f"  (file {os.path.basename(path)})")
        # kda train with tensorboard_dir: the logged losses, lr and grad norms, as TensorBoard sees them
        kda = os.environ.get("KDA_BIN", "./kda")
        tb, met = os.path.join(d, "train_tb"), os.path.join(d, "m.jsonl")
        subprocess.run([kda, "train", "configs/tiny-bytes.yaml", "--device", "cpu", "--set", "train_iters=6",
                        "--set", "lr_warmup_iters=2", "--set", "log_interval=2", "--set", "sample_tokens=0",
                        "--set", f"tensorboard_dir={tb}", "--set", f"metrics_file={met}"], check=True,
                       stdout=subprocess.DEVNULL)
        import json
        import numpy as np
        every = [json.loads(l) for l in open(met)]
        rows = [r for r in every if "loss" in r]
        vrows = [r for r in every if "val_loss" in r]
        acc = EventAccumulator(tb)
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        ok = {"lm loss", "learning-rate", "grad-norm", "iteration-time", "throughput"} <= tags
        print(("  ok   " if ok else "  FAIL ") + f" kda train's tags: {sorted(tags)}")
        fails += not ok
        for tag, key, src, n in (("lm loss", "loss", rows, 4), ("learning-rate", "lr", rows, 4),
                                 ("grad-norm", "grad_norm", rows, 4), ("lm loss validation", "val_loss", vrows, 1)):
            got = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags else []
            exp = [(r["iteration"], float(np.float32(r[key]))) for r in src]
            ok = len(got) == len(exp) == n and all(g[0] == e[0] and abs(g[1] - e[1]) <= 1e-5 * abs(e[1]) + 1e-12
                                                  for g, e in zip(got, exp))
            print(("  ok   " if ok else "  FAIL ") + f" {tag!r} = metrics {key}: {got}")
            fails += not ok
    print(f"test_tensorboard: {'FAILED' if fails else 'passed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
