"""KDA core parity with FLA's own PyTorch code (fp32, CPU): output and every input gradient.

Our side: build/tools/core_io runs src/model/kda_core.h (kda_core_fwd + kda_core_bwd) with both
algorithms, KDA_RECURRENT and KDA_CHUNKED, on the inputs this script writes.

FLA's side, in float32, gradients by torch autograd through the whole function
  q = l2norm(q_raw), k = l2norm(k_raw)         torch, x * rsqrt(sum x^2 + 1e-6) (FLA has it in Triton only)
  g = fla.ops.kda.gate.naive_kda_gate(f, A_log, dt_bias)     = -exp(A_log) * softplus(f + dt_bias)
  beta = sigmoid(b_logit)
  o = fla.ops.kda.naive.naive_recurrent_kda(q, k, v, g, beta, scale)       "FLA recurrent"
  o = fla.ops.kda.naive.naive_chunk_kda(...) on inputs zero-padded to a multiple of 64 tokens,
      cut back to T (it asserts T % 64 == 0; padding after the end cannot change causal
      outputs)                                                             "FLA chunk"
Also computed: the same function in float64 with our own transcription of the recurrence
(kda_ref.recurrence; FLA's naive code always computes in float32), itself checked against the
numpy oracle docs/kda_chunk_reference.py. It tells which side is off when
a check fails.

Two input cases: 0, mild gates; 1, gates as the model's init draws them (deep decay within a
chunk) plus a few gate inputs past softplus' z > 20 branch. FLA chunk's backward overflows to
NaN on case 1 (see CASES), so it is used on case 0 only.
Checked per case: the FLA references against the float64 function (the reference is sound),
then each of our two algorithms against each FLA reference, for o, d q_raw, d k_raw, d v, d f,
d b_logit, d A_log, d dt_bias: ||ours - FLA|| / ||FLA|| <= 1e-5.

Run from the repo root:
  .venv/bin/python tests/python/test_fla_core.py --core-io build/tools/core_io
  (--seed N or KDA_TEST_SEED=N replays a seed; --ref-only checks the Python side alone)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kda_ref  # noqa: E402
from kda_ref import rel  # noqa: E402

TOL = 1e-5
B, T, H, K, V, CHUNK = 2, 100, 3, 32, 64, 64  # T = 100: one full chunk and a partial one
SCALE = K ** -0.5
INPUTS = ("q_raw", "k_raw", "v", "f", "b_logit", "A_log", "dt_bias")
OUTPUTS = ("o",) + tuple("d_" + n for n in INPUTS)
SUMMED = ("d_A_log", "d_dt_bias")  # gradients reduced over tokens: judged against sum |term|


def make_inputs(seed: int, case: int) -> dict:
    """Random core inputs in float32.
    Case 0, mild gates: per-token decays exp(alpha) in about [0.6, 1), so that no chunk's
      cumulative log decay passes 88 (see CASES).
    Case 1, gates as the model's init draws them (§4: exp(A_log) in [1, 16], softplus(dt_bias)
      log-uniform on [1e-3, 0.1]) with wider f, so decays reach ~0 within a chunk, plus a few
      gate inputs past softplus' z > 20 branch (each wipes a state row)."""
    rng = np.random.default_rng([seed, case])
    n = lambda *s: rng.standard_normal(s)  # noqa: E731
    a_hi, dt_hi, f_std = (4.0, 0.05, 0.3) if case == 0 else (16.0, 0.1, 1.0)
    x = {
        "q_raw": n(B, T, H, K), "k_raw": n(B, T, H, K), "v": n(B, T, H, V),
        "f": f_std * n(B, T, H, K), "b_logit": n(B, T, H),
        "A_log": np.log(rng.uniform(1, a_hi, H)),
        "dt_bias": np.log(np.expm1(np.exp(rng.uniform(np.log(1e-3), np.log(dt_hi), H * K)))),
        "d_o": n(B, T, H, V),
    }
    if case == 1:
        idx = rng.choice(B * T * H * K, size=8, replace=False)
        x["f"].reshape(-1)[idx] = 25.0
    return {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.float32) for k, v in x.items()}


# FLA references used per case. naive_chunk_kda evaluates exp(G_c - G_i) for every pair of a
# chunk, c < i included, and masks afterwards: once a chunk's cumulative log decay passes ~88
# those positive exponents overflow to inf in fp32 and its backward returns NaN (kda-model.md
# §3.5), which the model's init gates already do. So case 1 uses FLA's recurrence only.
CASES = (("mild gates", ("fla_recurrent", "fla_chunk")),
         ("init gates, deep decay, softplus z > 20", ("fla_recurrent",)))


def reference(x: dict, core: str, dtype: torch.dtype) -> dict:
    """o and the gradients of sum(o * d_o) for one reference core, by autograd."""
    naive_recurrent_kda, naive_chunk_kda, naive_kda_gate = kda_ref.import_fla_kda()
    leaves = {k: x[k].to(dtype).clone().requires_grad_(True) for k in INPUTS}
    q, k = kda_ref.l2norm(leaves["q_raw"]), kda_ref.l2norm(leaves["k_raw"])
    if core == "exact":
        g = kda_ref.gate(leaves["f"], leaves["A_log"], leaves["dt_bias"])
    else:
        g = naive_kda_gate(leaves["f"], leaves["A_log"], leaves["dt_bias"], output_dtype=dtype)
    beta = torch.sigmoid(leaves["b_logit"])
    v = leaves["v"]
    if core == "exact":
        o = kda_ref.recurrence(q, k, v, g, beta, SCALE)
    elif core == "fla_recurrent":
        o, _ = naive_recurrent_kda(q, k, v, g, beta, scale=SCALE)
    elif core == "fla_chunk":
        pad = (-T) % CHUNK
        qp, kp, vp, gp = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v, g))
        bp = F.pad(beta, (0, 0, 0, pad))
        o, _ = naive_chunk_kda(qp, kp, vp, gp, bp, scale=SCALE, chunk_size=CHUNK)
        o = o[:, :T]
    else:
        raise ValueError(core)
    g.retain_grad()
    (o * x["d_o"].to(dtype)).sum().backward()
    out = {"o": o.detach()}
    for name in INPUTS:
        out["d_" + name] = leaves[name].grad.detach()
    if core == "exact":
        terms = summed_terms(leaves, g.detach(), g.grad.detach())
        out["signed_sum"] = {n: terms[n][0].sum(dim=terms[n][1]).reshape(-1) for n in SUMMED}
        out["magnitude"] = {n: terms[n][0].abs().sum(dim=terms[n][1]).reshape(-1) for n in SUMMED}
    return out


def summed_terms(leaves: dict, g: torch.Tensor, dg: torch.Tensor) -> dict:
    """For each SUMMED gradient, its terms and the dims they are summed over, from dL/dg:
    g = -exp(A_log) softplus(f + dt_bias), so
      d A_log[h]      = sum_{b,t,k} dg * g
      d dt_bias[h,k]  = sum_{b,t}   dg * -exp(A_log[h]) * softplus'(f + dt_bias)
    with softplus' = sigmoid, or 1 past F.softplus' threshold 20 (where it returns z itself)."""
    H, K = g.shape[-2:]
    a = leaves["A_log"].detach().exp().view(H, 1)
    z = leaves["f"].detach() + leaves["dt_bias"].detach().view(H, K)
    dsp = torch.where(z > 20, torch.ones_like(z), torch.sigmoid(z))
    return {"d_A_log": (dg * g, (0, 1, 3)), "d_dt_bias": (-dg * a * dsp, (0, 1))}


def rel_err(a, b, name: str, exact: dict) -> float:
    """||a - b|| over ||b||, or for a SUMMED gradient over ||sum |term| || (never smaller)."""
    if name not in SUMMED:
        return rel(a, b)
    m = exact["magnitude"][name]
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape or b.shape != m.shape:
        raise ValueError(f"rel_err {name}: shapes differ: {tuple(a.shape)}, {tuple(b.shape)}, {tuple(m.shape)}")
    d = torch.linalg.vector_norm(a - b)
    return d.item() / torch.linalg.vector_norm(m).item()


def check_oracle_against_numpy(x: dict) -> tuple[bool, str]:
    """Our float64 recurrence vs the shared numpy oracle's `recurrent`, forward, slice by slice."""
    sys.path.insert(0, str(kda_ref.ORACLE_DIR))
    import kda_chunk_reference as oracle  # noqa: E402

    d = {k: v.to(torch.float64) for k, v in x.items()}
    q, k = kda_ref.l2norm(d["q_raw"]), kda_ref.l2norm(d["k_raw"])
    g = kda_ref.gate(d["f"], d["A_log"], d["dt_bias"])
    beta = torch.sigmoid(d["b_logit"])
    o = kda_ref.recurrence(q, k, d["v"], g, beta, SCALE)
    worst = 0.0
    for b in range(B):
        for h in range(H):
            ref, _ = oracle.recurrent(q[b, :, h].numpy(), k[b, :, h].numpy(), d["v"][b, :, h].numpy(),
                                      g[b, :, h].numpy(), beta[b, :, h].numpy(), np.zeros((K, V)), SCALE)
            worst = max(worst, rel(o[b, :, h], torch.from_numpy(ref)))
    return worst <= 1e-12, f"rel {worst:.1e} (<= 1e-12), worst (b,h) slice"


def run_core_io(exe: Path, x: dict, tmp: Path) -> dict:
    from safetensors.torch import load_file, save_file

    src, dst = tmp / "core_in.safetensors", tmp / "core_out.safetensors"
    tensors = {k: v.contiguous() for k, v in x.items()}
    tensors["chunk"] = torch.tensor(CHUNK, dtype=torch.int32)
    tensors["scale"] = torch.tensor(SCALE, dtype=torch.float32)
    save_file(tensors, str(src))
    r = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True)
    if r.returncode != 0:
        kda_ref.die(f"test_fla_core: {exe} failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    for line in r.stdout.strip().splitlines():
        print("  " + line)
    got = load_file(str(dst))
    out = {}
    for algo in ("recurrent", "chunked"):
        out[algo] = {}
        for name in OUTPUTS:
            key = f"{algo}.{name}"
            if key not in got:
                kda_ref.die(f"test_fla_core: {dst} has no tensor '{key}'")
            out[algo][name] = got[key]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core-io", type=Path, default=None,
                    help="the core_io tool (default: $KDA_BUILD/tools/core_io, KDA_BUILD=build)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ref-only", action="store_true", help="check FLA's reference and the float64 oracle only")
    args = ap.parse_args()
    exe = args.core_io or Path(os.environ.get("KDA_BUILD", "build")) / "tools" / "core_io"
    if not exe.is_absolute():
        exe = kda_ref.ROOT / exe if not exe.exists() else exe.resolve()
    if not args.ref_only and not exe.is_file():
        kda_ref.die(f"test_fla_core: {exe} not found: build it with `make build/tools/core_io` "
                    f"(or pass --core-io PATH, or --ref-only)")

    seed = kda_ref.test_seed(args.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    print(f"B={B} T={T} H={H} K={K} V={V} chunk={CHUNK} scale=K^-1/2, fp32; tolerance {TOL:g}")

    passed, failed = 0, []

    def check(label: str, ok: bool, detail: str):
        nonlocal passed
        print(f"  {'ok  ' if ok else 'FAIL'}  {label:<48} {detail}")
        if ok:
            passed += 1
        else:
            failed.append(label)

    for case, (case_name, fla_cores) in enumerate(CASES):
        x = make_inputs(seed, case)
        print(f"case {case}: {case_name}; FLA references: {', '.join(fla_cores)}")
        refs = {c: reference(x, c, torch.float64 if c == "exact" else torch.float32) for c in ("exact",) + fla_cores}
        exact = refs["exact"]
        ok, detail = check_oracle_against_numpy(x)
        check(f"{case}: float64 oracle o vs numpy oracle", ok, detail)
        for name in SUMMED:  # the terms behind the SUMMED denominators are the gradient's
            e = rel(exact["signed_sum"][name], exact[name])
            check(f"{case}: float64 {name} = sum of its terms", e <= 1e-12, f"rel {e:.1e} (<= 1e-12)")
        for name in OUTPUTS:
            for c in fla_cores:
                e = rel_err(refs[c][name], exact[name], name, exact)
                finite = bool(torch.isfinite(refs[c][name]).all())
                check(f"{case}: {c} {name} vs float64", finite and e <= TOL,
                      f"rel {e:.2e}" + ("" if finite else "  (FLA's result is not finite)"))
        if args.ref_only:
            continue
        with tempfile.TemporaryDirectory(prefix="kda_fla_core_") as td:
            ours = run_core_io(exe, x, Path(td))
        for algo in ("recurrent", "chunked"):
            for name in OUTPUTS:
                o = ours[algo][name]
                for c in fla_cores:
                    e = rel_err(o, refs[c][name], name, exact)
                    check(f"{case}: ours {algo} {name} vs {c}", e <= TOL,
                          f"rel {e:.2e}   (vs float64: ours {rel_err(o, exact[name], name, exact):.1e}, "
                          f"FLA {rel_err(refs[c][name], exact[name], name, exact):.1e})")

    print(f"test_fla_core (seed {seed}): " + ("all checks passed" if not failed else "FAILED: " + ", ".join(failed)))
    print(f"test_fla_core: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
