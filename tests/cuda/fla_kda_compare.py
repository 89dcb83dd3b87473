#!/usr/bin/env python3
"""The CUDA KDA core next to FLA's chunk_kda Triton kernel, on the same GPU and inputs.

    fla_kda_compare.py check BIN_DIR            correctness: ours vs FLA vs a float64 recurrence
    fla_kda_compare.py bench B [B ...]          FLA chunk_kda timings at T=2048, H=8, K=32, V=64
    fla_kda_compare.py all BIN_DIR B [B ...]    both in one process (Triton compiles and
                                                autotunes once: its keys are H, K, V, not B, T)
    fla_kda_compare.py profile B                one forward + backward in the CUDA profiler's
                                                range (ncu --profile-from-start off)

check: random bf16 inputs with the model's distributions (kda-model.md §4) go to
BIN_DIR/kda_core_io (our core, through files) and to fla.ops.kda.chunk_kda with the layer's
training options (l2norm, gate and beta sigmoid in the kernel); both are compared with a
float64 token recurrence (§3.1) run by autograd on the same bf16 values, by
rel = ||x - ref|| / ||ref||. Passes when ours is within the §0 tolerances or no worse than
1.2 x FLA's own error (the §0 figures are FLA's, measured on FLA's test inputs; on these
inputs FLA's output error is ~5.1e-3). KDA_FLA_EXTRA=1 adds a K=64, V=128 case.
bench: medians of triton.testing.do_bench (warm-up first: Triton compiles and autotunes).
"""
import math
import os
import subprocess
import sys
import tempfile

import torch

DEV = "cuda"
TOL = {"o": 5e-3, "dq": 8e-3, "dk": 8e-3, "dv": 8e-3, "df": 2e-2, "db": 2e-2, "dA_log": 1e-2, "ddt_bias": 8e-3}


def make_inputs(B, T, H, K, V, gen):
    dev = DEV

    def n(*shape, sd=1.0):
        return (torch.randn(*shape, generator=gen, device=dev) * sd).bfloat16()

    x = dict(q=n(B, T, H, K), k=n(B, T, H, K), v=n(B, T, H, V), f=n(B, T, H, K, sd=0.5), b=n(B, T, H))
    x["A_log"] = torch.log(1 + 15 * torch.rand(H, generator=gen, device=dev)).bfloat16()
    u = torch.rand(H * K, generator=gen, device=dev, dtype=torch.float64)
    dt = torch.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    x["dt_bias"] = (dt + torch.log(-torch.expm1(-dt))).bfloat16()
    x["do"] = n(B, T, H, V)
    return x


def ref64(x, scale):
    """float64 recurrence (§3.1) with the in-kernel preamble (§2.3 step 7), gradients by autograd."""
    t = {k: v.double().clone().requires_grad_(k != "do") for k, v in x.items()}
    q = t["q"] / torch.sqrt((t["q"] ** 2).sum(-1, keepdim=True) + 1e-6)
    k = t["k"] / torch.sqrt((t["k"] ** 2).sum(-1, keepdim=True) + 1e-6)
    B, T, H, K = q.shape
    z = t["f"] + t["dt_bias"].view(H, K)
    sp = torch.where(z > 20, z, torch.log1p(torch.exp(torch.clamp(z, max=20))))
    a = -torch.exp(t["A_log"]).view(1, 1, H, 1) * sp
    beta = torch.sigmoid(t["b"])
    S = torch.zeros(B, H, K, t["v"].shape[-1], dtype=torch.float64, device=q.device)
    outs = []
    for i in range(T):
        S = torch.exp(a[:, i])[..., None] * S
        e = t["v"][:, i] - torch.einsum("bhk,bhkv->bhv", k[:, i], S)
        S = S + beta[:, i][..., None, None] * k[:, i][..., None] * e[:, :, None, :]
        outs.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, i], S))
    o = torch.stack(outs, 1)
    (o * t["do"]).sum().backward()
    g = {"o": o.detach()}
    for name, src in [("dq", "q"), ("dk", "k"), ("dv", "v"), ("df", "f"), ("db", "b"), ("dA_log", "A_log"),
                      ("ddt_bias", "dt_bias")]:
        g[name] = t[src].grad
    return g


def fla_run(x, scale):
    from fla.ops.kda import chunk_kda
    t = {k: v.clone().requires_grad_(k != "do") for k, v in x.items()}
    A = t["A_log"].float().detach().requires_grad_()
    dtb = t["dt_bias"].float().detach().requires_grad_()
    o, _ = chunk_kda(q=t["q"], k=t["k"], v=t["v"], g=t["f"], beta=t["b"], scale=scale, A_log=A, dt_bias=dtb,
                     use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                     state_v_first=True)
    o.backward(t["do"])
    g = {"o": o.detach()}
    for name, src in [("dq", "q"), ("dk", "k"), ("dv", "v"), ("df", "f"), ("db", "b")]:
        g[name] = t[src].grad
    g["dA_log"], g["ddt_bias"] = A.grad, dtb.grad
    return g


def ours_run(x, bin_dir, shape):
    with tempfile.TemporaryDirectory() as d:
        for name, v in x.items():
            v.contiguous().view(torch.int16).cpu().numpy().tofile(os.path.join(d, name + ".bf16"))
        subprocess.run([os.path.join(bin_dir, "kda_core_io"), d] + [str(s) for s in shape], check=True)
        import numpy as np
        g = {}
        for name in TOL:
            g[name] = torch.from_numpy(np.fromfile(os.path.join(d, name + ".f32"), dtype=np.float32)).cuda()
        return g


def rel(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    if not torch.isfinite(a).all():
        return float("inf")
    return ((a - b).norm() / b.norm()).item()


def check(bin_dir):
    ok = True
    gen = torch.Generator(device=DEV)
    seed = int(os.environ.get("KDA_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed})")
    gen.manual_seed(seed)
    shapes = [(2, 1000, 8, 32, 64)]  # this model's heads, partial last chunk
    if os.environ.get("KDA_FLA_EXTRA"):
        shapes.append((1, 300, 2, 64, 128))
    for shape in shapes:
        B, T, H, K, V = shape
        scale = K ** -0.5
        x = make_inputs(B, T, H, K, V, gen)
        ref = ref64(x, scale)
        ours = ours_run(x, bin_dir, shape)
        fla = fla_run(x, scale)
        print(f"KDA core B={B} T={T} H={H} K={K} V={V}: rel err vs float64 recurrence")
        print(f"  {'tensor':10s} {'ours':>10s} {'FLA':>10s} {'ours-FLA':>10s} {'tol':>8s}")
        for name, tol in TOL.items():
            e_o, e_f = rel(ours[name], ref[name]), rel(fla[name], ref[name])
            e_of = rel(ours[name], fla[name])
            good = e_o <= max(tol, 1.2 * e_f)
            ok &= good
            print(f"  {name:10s} {e_o:10.2e} {e_f:10.2e} {e_of:10.2e} {tol:8.0e}  {'ok' if good else 'FAIL'}")
    print("fla_kda_compare check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def fla_step(B, gen):
    """FLA's chunk_kda on fresh model-like inputs at B x 2048 (H 8, K 32, V 64): (fwd, fwd_bwd,
    leaves), compiled and autotuned by two warm-up calls. The leaves' .grad are set to None before
    each timed call (do_bench's grad_to_none), so that the backward does not also add into the
    previous call's gradients: in a training step q, k, v, ... are activations, not leaves."""
    from fla.ops.kda import chunk_kda
    T, H, K, V = 2048, 8, 32, 64
    x = make_inputs(B, T, H, K, V, gen)
    t = {k: v.clone().requires_grad_(k != "do") for k, v in x.items()}
    A = t["A_log"].float().detach().requires_grad_()
    dtb = t["dt_bias"].float().detach().requires_grad_()

    def fwd():
        return chunk_kda(q=t["q"], k=t["k"], v=t["v"], g=t["f"], beta=t["b"], scale=K ** -0.5, A_log=A,
                         dt_bias=dtb, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                         use_beta_sigmoid_in_kernel=True, state_v_first=True)[0]

    def fwd_bwd():
        fwd().backward(t["do"])

    fwd_bwd(), fwd_bwd()  # compile + autotune
    torch.cuda.synchronize()
    leaves = [v for k, v in t.items() if k != "do"] + [A, dtb]
    return fwd, fwd_bwd, leaves


def bench(batches):
    from triton.testing import do_bench
    gen = torch.Generator(device=DEV)
    gen.manual_seed(1234)
    for B in batches:
        fwd, fwd_bwd, leaves = fla_step(B, gen)
        tf = do_bench(fwd, warmup=100, rep=500, return_mode="median")
        tb = do_bench(fwd_bwd, warmup=100, rep=500, return_mode="median", grad_to_none=leaves)
        print(f"FLA   chunk_kda  B={B} T=2048 H=8 K=32 V=64: fwd {tf:.3f} ms  fwd+bwd {tb:.3f} ms", flush=True)
    return 0


def profile(B):
    """One forward + backward inside the CUDA profiler's range (for `ncu --profile-from-start off`:
    FLA's kernels one by one, its compile and autotune left out)."""
    gen = torch.Generator(device=DEV)
    gen.manual_seed(1234)
    _, fwd_bwd, leaves = fla_step(B, gen)
    for x in leaves:
        x.grad = None
    torch.cuda.profiler.start()
    fwd_bwd()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"FLA   chunk_kda  B={B}: one forward + backward, profiled", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) >= 4 and sys.argv[1] == "all":
        rc = check(sys.argv[2])
        sys.exit(bench([int(b) for b in sys.argv[3:]]) or rc)
    if len(sys.argv) >= 3 and sys.argv[1] == "bench":
        sys.exit(bench([int(b) for b in sys.argv[2:]]))
    if len(sys.argv) == 3 and sys.argv[1] == "profile":
        sys.exit(profile(int(sys.argv[2])))
    print(__doc__)
    sys.exit(2)
