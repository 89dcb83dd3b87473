"""kda_runs — how the Python benchmarks run and time both sides, one definition for all of them
(eval_bench.py, generate_bench.py, gpu_gen_eval_bench.py):

  kda side        the kda program (KDA_BIN or ./kda), a checked run, `kda generate` with --show-stats
                  parsed per prompt (best of the rounds), `kda eval` timed from its "... requests"
                  stderr line to its exit
  reference side  a transformers streamer that notes when each new id arrives (Clock), and
                  lm-eval's simple_evaluate with the time inside HFLM._loglikelihood_tokens

Each caller names itself (`tool`) so that a failure says which benchmark stopped and why.
"""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# `kda generate --show-stats`: one line a prompt on stderr
STATS = re.compile(r"\[prompt (\d+)\] (\d+) prompt tokens, prefill ([\d.]+) ms .*first token after ([\d.]+) ms, "
                   r"(\d+) new tokens, ([\d.]+) tokens/s")


def kda_bin(tool: str, hint: str = "run `make kda` (or point KDA_BIN at the kda program)") -> str:
    exe = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    if not exe.is_file():
        sys.exit(f"{tool}: {exe} not found: {hint}")
    return str(exe.resolve())


def run(cmd: list, what: str, tool: str, env=None) -> subprocess.CompletedProcess:
    """cmd in the repository root; on failure the benchmark stops with the command and its output's tail."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"{tool}: {what} failed ({r.returncode}):\n  {' '.join(map(str, cmd))}\n"
                 f"{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def best(runs: list[dict]) -> dict:
    """The best of repeated runs of one prompt: shortest TTFT, highest decode rate; whether the ids
    were the same every time."""
    out = dict(runs[0])
    out["ttft_ms"] = min(r["ttft_ms"] for r in runs)
    out["tok_s"] = max(r["tok_s"] for r in runs)
    out["ids_stable"] = all(r["ids"] == runs[0]["ids"] for r in runs)
    return out


def kda_generate(cmd: list, prompts: list[str], repeat: int, tool: str) -> list[dict]:
    """`cmd` (kda generate ... --print-ids --show-stats, without prompts) on prompt 1 as a warm-up,
    then `repeat` rounds of all prompts in one process; per prompt the best round."""
    order = [prompts[0]] + prompts * repeat
    for p in order:
        cmd = cmd + ["--prompt", p]
    r = run(cmd, "kda generate", tool)
    stats = [m for m in (STATS.search(line) for line in r.stderr.splitlines()) if m]
    ids = [[int(t) for t in line.split()] for line in r.stdout.splitlines()]
    if len(stats) != len(order) or len(ids) != len(order):
        sys.exit(f"{tool}: unexpected kda generate output:\n{r.stdout}\n{r.stderr}")
    runs = [{"prompt_tokens": int(m[2]), "ttft_ms": float(m[4]), "new": int(m[5]), "tok_s": float(m[6]), "ids": i}
            for m, i in zip(stats[1:], ids[1:])]
    return [best(runs[k::len(prompts)]) for k in range(len(prompts))]


def kda_eval_timed(cmd: list, out: Path, samples: Path, tool: str, stdout=subprocess.DEVNULL, env=None) -> dict:
    """One `kda eval` process (cmd writes --output out, --log-samples samples); stderr is read as it
    comes, so that scoring is timed from the "N tasks, D documents, R requests" line to the exit."""
    err, t_score, docs, reqs = [], None, 0, 0
    t0 = time.perf_counter()
    p = subprocess.Popen([str(c) for c in cmd], stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    for line in p.stderr:
        err.append(line)
        if t_score is None and " documents, " in line and " requests, " in line:
            t_score = time.perf_counter()
            head = line.split(": ", 1)[1].split(", ")
            docs, reqs = int(head[1].split()[0]), int(head[2].split()[0])
    rc = p.wait()
    t_end = time.perf_counter()
    if rc != 0 or t_score is None:
        sys.exit(f"{tool}: kda eval failed ({rc}):\n  {' '.join(map(str, cmd))}\n{''.join(err)}")
    by_task: dict = {}
    for line in samples.read_text(encoding="utf-8").splitlines():
        if line.strip():
            s = json.loads(line)
            by_task.setdefault(s["task"], {})[s["doc_id"]] = s
    return {"docs": docs, "reqs": reqs, "score_s": t_end - t_score, "run_s": t_end - t0,
            "results": json.loads(out.read_text())["results"], "samples": by_task}


class Clock:
    """A transformers streamer that only notes when each new id arrives (generate hands over the
    prompt first, and moves the ids to the host before put())."""

    def __init__(self):
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value):
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self):
        pass


def lm_eval_timed(lm, tasks: list[str], include_path: Path, limit: int, sync=lambda: None) -> tuple[dict, dict, float]:
    """lm-eval's simple_evaluate on lm (an HFLM) with log_samples, every seed 0; returns its result,
    {"s": seconds inside _loglikelihood_tokens, "reqs": requests scored} and the whole run's seconds.
    sync() is called around each timed call (a CUDA device's queue)."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    clock = {"s": 0.0, "reqs": 0}
    inner = type(lm)._loglikelihood_tokens

    def timed(requests, *args, **kwargs):
        sync()
        t = time.perf_counter()
        out = inner(lm, requests, *args, **kwargs)
        sync()
        clock["s"] += time.perf_counter() - t
        clock["reqs"] += len(requests)
        return out

    def quiet(requests, disable_tqdm=False):  # no progress bars
        return type(lm).loglikelihood(lm, requests, disable_tqdm=True)

    lm._loglikelihood_tokens, lm.loglikelihood = timed, quiet
    try:
        t0 = time.perf_counter()
        res = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=TaskManager(include_path=str(include_path)),
                                      limit=limit, log_samples=True, random_seed=0, numpy_random_seed=0,
                                      torch_random_seed=0, fewshot_random_seed=0)
        run_s = time.perf_counter() - t0
    finally:
        del lm._loglikelihood_tokens, lm.loglikelihood
    return res, clock, run_s
