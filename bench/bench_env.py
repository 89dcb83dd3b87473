"""bench_env — the machine line the Python benchmarks print (CPU, cores, commit, date, versions)."""
import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine(extra: str) -> str:
    """CPU model, core count, git commit, UTC date, torch and transformers versions, then `extra`."""
    import torch
    import transformers
    cpu = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    return (f"{cpu}, {os.cpu_count()} cores; commit {commit.strip()}; {time.strftime('%Y-%m-%d', time.gmtime())}; "
            f"torch {torch.__version__}, transformers {transformers.__version__}, {extra}")
