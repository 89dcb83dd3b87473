#!/usr/bin/env python3
"""FLA's KDAForCausalLM training step on the GPU, for the side-by-side with `kda bench`.

The reference setup of ../docs (gpu-machine.md): fp32 master weights, bf16 autocast, FLA's fused
norms / SwiGLU / linear cross-entropy (KDAConfig defaults), fused AdamW (0.9, 0.95, wd 0.01),
global-norm clip 1.0, eager PyTorch; TF32 allowed (FLA's faster mode). Random token ids, seq 2048.
Prints one line per micro-batch: ms/step (median), tokens/s, MFU by kda-model.md §7, peak memory,
and where the driver has the board's energy counter (NVML), joules a step and tokens per joule
over the timed steps, as `kda bench` prints them.
Needs torch + triton (present on the GPU machine) and FLA's wheels (carried, see docs/cuda.md).
"""
import argparse
import ctypes
import statistics
import sys
import time

import torch

# kda-model.md §7 (3 x forward, matmuls + chunked core), as `kda bench` prints them per config
FLOPS_PER_TOKEN = {"300M": 1831993344, "1B": 7079460864}
# configs/kda-300M.yaml and configs/kda-1B.yaml
SIZES = {"300M": dict(hidden_size=1024, num_hidden_layers=12, num_heads=8, intermediate_size=4096),
         "1B": dict(hidden_size=2048, num_hidden_layers=16, num_heads=16, intermediate_size=8192)}
PEAK = 989.4e12                    # bf16 dense datasheet peak, H100/H200 SXM


def energy_counter():
    """A function returning the board's energy counter in joules (NVML through ctypes, the GPU
    that torch uses, matched by PCI bus id), or None where the driver or the board has none."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0".encode()
        dev, mj = ctypes.c_void_p(), ctypes.c_ulonglong()
        if nvml.nvmlInit_v2() or nvml.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(dev)):
            return None
        read = nvml.nvmlDeviceGetTotalEnergyConsumption
        if read(dev, ctypes.byref(mj)):
            return None
    except (OSError, AttributeError):
        return None

    def joules():
        return mj.value / 1e3 if read(dev, ctypes.byref(mj)) == 0 else float("nan")
    return joules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="300M", choices=sorted(SIZES))
    ap.add_argument("--micro", default="16,32")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-tf32", action="store_true")
    a = ap.parse_args()
    import transformers
    from fla.models import KDAConfig, KDAForCausalLM
    tied = getattr(KDAForCausalLM, "_tied_weights_keys", None)
    if int(transformers.__version__.split(".")[0]) >= 5 and isinstance(tied, (list, tuple)):
        KDAForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}
    torch.backends.cuda.matmul.allow_tf32 = not a.no_tf32
    torch.backends.cudnn.allow_tf32 = not a.no_tf32
    torch.manual_seed(42)
    cfg = KDAConfig(**SIZES[a.model], head_dim=32, expand_v=2.0, use_short_conv=True, conv_size=4, vocab_size=128256,
                    norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=2048)
    model = KDAForCausalLM(cfg).cuda()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01, fused=True)
    print(f"FLA KDAForCausalLM: {n_params} parameters, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"tf32 {'on' if not a.no_tf32 else 'off'}", flush=True)
    energy = energy_counter()
    for B in [int(x) for x in a.micro.split(",")]:
        torch.cuda.reset_peak_memory_stats()
        ids = torch.randint(0, cfg.vocab_size, (B, a.seq), device="cuda")
        times = []
        try:
            for s in range(a.warmup + a.steps):
                t0 = time.perf_counter()
                torch.cuda.synchronize()
                if s == a.warmup and energy:
                    j0 = energy()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                if s >= a.warmup:
                    times.append(time.perf_counter() - t0)
                else:
                    print(f"  warm-up step {s} ({B}x{a.seq}): {time.perf_counter() - t0:.1f} s, loss {loss.item():.4f}",
                          flush=True)
        except torch.cuda.OutOfMemoryError:
            print(f"FLA {a.model} micro-batch {B} x {a.seq}: out of memory")
            continue
        joules = energy() - j0 if energy else 0.0  # the last step ended with a synchronize
        med = statistics.median(times)
        tps = B * a.seq / med
        used = (f" | {joules / a.steps:.1f} J a step, {B * a.seq * a.steps / joules:.0f} tokens per joule"
                if joules > 0 else "")
        print(f"FLA {a.model} micro-batch {B} x {a.seq}: {med * 1e3:.1f} ms/step | {tps:.0f} tokens/s | "
              f"MFU {100 * tps * FLOPS_PER_TOKEN[a.model] / PEAK:.1f}% | peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB | "
              f"loss {loss.item():.4f}{used}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
