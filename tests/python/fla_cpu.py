"""fla_cpu — make FLA's KDA model run on a CPU in pure PyTorch (fp32 or fp64).

FLA (flash-linear-attention) launches Triton kernels for almost every op of the KDA model;
Triton cannot run on a CPU. `install()` replaces each Triton entry point that
KDAForCausalLM reaches by a plain-PyTorch equivalent (autograd does the backward), and
returns a list of what it did, one line per substitution. `kda_config_flags()` gives the
KDAConfig flags that select FLA's own torch paths where FLA has them.

Entry points and what replaces them:
  fla.layers.kda.chunk_kda, fused_recurrent_kda  -> torch_kda(): kda-model.md §2.3 step 7
      (l2norm x/sqrt(sum x^2 + 1e-6), gate -exp(A_log)*softplus(f + dt_bias) via FLA's
      fla.ops.kda.gate.naive_kda_gate, beta = sigmoid(b)), then FLA's own recurrence
      fla.ops.kda.naive.naive_recurrent_kda (which computes in fp32; when the model runs in
      fp64, a float64 transcription of the same recurrence, §3.1, is used instead)
  ShortConvolution.forward      -> causal depthwise conv1d + SiLU in torch; history zero, or the
      cache [B, D, W] (the last W inputs, FLA's layout: its last W-1 are the history), which
      a one-token call without autograd updates in place, as FLA's step does
  FusedRMSNormGated.forward     -> x * rsqrt(mean x^2 + eps) * w * act(g) in fp32
  fla.modules.mlp.swiglu        -> silu(gate) * up (used even when fuse_swiglu = False)
  fuse_norm = False             -> FLA builds torch.nn.RMSNorm (config flag, no patch)
  fuse_swiglu = False           -> no fused SwiGLU+Linear (config flag)
  fuse_cross_entropy = False    -> torch.nn.CrossEntropyLoss (config flag)
  KDAForCausalLM._tied_weights_keys -> dict form when FLA still declares the
      transformers-4 list form and transformers >= 5 is installed
  KDAForCausalLM.forward       -> also takes `cache=` as past_key_values when FLA's forward has
      no `cache` parameter (transformers 5's generate passes the recurrent cache under that
      name; FLA 0.6.0 would drop it into **kwargs and decode every step from an empty state)

Anything FLA would still send to Triton fails loudly on a CPU (no active driver), so a
missed entry point cannot pass silently.
"""

from __future__ import annotations

import functools
import inspect
import warnings

import torch
import torch.nn.functional as F

_installed: list[str] | None = None


def kda_config_flags() -> dict:
    """KDAConfig keyword arguments that select FLA's torch paths."""
    return {"fuse_norm": False, "fuse_swiglu": False, "fuse_cross_entropy": False, "use_l2warp": False}


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    # FLA's l2norm: eps added to the sum of squares, inside the square root (not F.normalize)
    xf = x.float() if x.dtype != torch.float64 else x
    return xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + eps)


def torch_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
              output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
              use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, safe_gate=False,
              lower_bound=None, state_v_first=False, cu_seqlens=None, **unused):
    """Drop-in for chunk_kda / fused_recurrent_kda (the arguments FLA's KDA layer passes)."""
    from fla.ops.kda.gate import naive_kda_gate
    from fla.ops.kda.naive import naive_recurrent_kda

    if cu_seqlens is not None:
        raise NotImplementedError("fla_cpu.torch_kda: variable-length batches (cu_seqlens) are not supported")
    if safe_gate or lower_bound is not None:
        raise NotImplementedError("fla_cpu.torch_kda: safe_gate / lower_bound gates are not supported")
    dtype = v.dtype
    # compute in fp32 (fp64 when the model runs in fp64)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    q, k, v, g, beta = (t.to(work) for t in (q, k, v, g, beta))
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    if use_gate_in_kernel:
        g = naive_kda_gate(g, A_log.to(work), None if dt_bias is None else dt_bias.to(work), output_dtype=work)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta)
        if allow_neg_eigval:
            beta = beta * 2
    h0 = initial_state
    if h0 is not None:
        h0 = h0.to(work)
        if state_v_first:  # FLA's V-first cache layout [B, HV, V, K]; the naive code wants [B, HV, K, V]
            h0 = h0.transpose(-1, -2)
    if work == torch.float64:  # FLA's naive recurrence computes in fp32; an fp64 reference needs fp64
        o, S = _recurrent_f64(q, k, v, g, beta, scale, h0, output_final_state)
    else:
        o, S = naive_recurrent_kda(q, k, v, g, beta, scale=scale, initial_state=h0,
                                   output_final_state=output_final_state)
    if S is not None and state_v_first:
        S = S.transpose(-1, -2).contiguous()
    return o.to(dtype), S


def _recurrent_f64(q, k, v, g, beta, scale, h0, output_final_state):
    """kda-model.md §3.1 in float64 (used only when the model runs in float64; H == HV)."""
    Bn, Tn, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    S = q.new_zeros(Bn, H, K, V) if h0 is None else h0.clone()
    outs = []
    for t in range(Tn):
        S = S * g[:, t].exp()[..., None]
        e = v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)
        S = S + torch.einsum("bhk,bhv->bhkv", beta[:, t][..., None] * k[:, t], e)
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S))
    return torch.stack(outs, 1), (S if output_final_state else None)


def _short_conv_forward(self, x, residual=None, mask=None, cache=None, output_final_state=False,
                        cu_seqlens=None, **unused):
    """ShortConvolution in torch: y[t] = act(sum_j w[c,0,j] * x[t-W+1+j] (+ bias)), zero history
    (or the cache's)."""
    if cu_seqlens is not None:
        raise NotImplementedError("fla_cpu: ShortConvolution with cu_seqlens is not supported")
    if mask is not None:
        x = x * mask.unsqueeze(-1)
    T, W = x.shape[1], self.kernel_size[0]
    if cache is not None:
        return _short_conv_cached(self, x, residual, cache, output_final_state)
    y = F.conv1d(x.transpose(1, 2), self.weight, self.bias, padding=W - 1, groups=self.hidden_size)[..., :T]
    y = y.transpose(1, 2)
    if self.activation in ("silu", "swish"):
        y = F.silu(y)
    if residual is not None:
        y = y + residual
    final = None
    if output_final_state:  # last W inputs per channel, [B, D, W]
        final = F.pad(x.transpose(1, 2), (max(W - T, 0), 0))[..., -W:].contiguous()
    return y, final


def _short_conv_cached(self, x, residual, cache, output_final_state):
    """ShortConvolution continuing from cache [B, D, W] (FLA's decode path)."""
    T, W = x.shape[1], self.kernel_size[0]
    xt = torch.cat([cache[..., 1:].to(x.dtype), x.transpose(1, 2)], -1)  # [B, D, W-1+T]
    y = F.conv1d(xt, self.weight, self.bias, groups=self.hidden_size).transpose(1, 2)
    if self.activation in ("silu", "swish"):
        y = F.silu(y)
    if residual is not None:
        y = y + residual
    final = xt[..., -W:].contiguous()
    if T == 1 and not torch.is_grad_enabled():  # FLA's one-token step updates the cache in place
        cache.copy_(final)
        final = cache
    return y, (final if output_final_state else None)


def _rms_norm_gated_forward(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
    """FusedRMSNormGated in torch: rmsnorm(x) * w * act(g), fp32 math, one rounding."""
    if residual is not None or prenorm:
        raise NotImplementedError("fla_cpu: FusedRMSNormGated with residual / prenorm is not supported")
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf, gf = x.to(work), g.to(work)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
    if self.weight is not None:
        y = y * self.weight.to(work)
    if self.bias is not None:
        y = y + self.bias.to(work)
    if self.activation in ("swish", "silu"):
        y = y * F.silu(gf)
    elif self.activation == "sigmoid":
        y = y * torch.sigmoid(gf)
    else:
        raise NotImplementedError(f"fla_cpu: gate activation {self.activation!r}")
    return y.to(x.dtype)


def _swiglu(x, y):
    return F.silu(x) * y


def _forward_taking_cache(forward):
    @functools.wraps(forward)  # transformers reads the signature (logits_to_keep): keep FLA's
    def forward_taking_cache(self, *args, cache=None, **kwargs):
        if cache is not None and kwargs.get("past_key_values") is None:
            kwargs["past_key_values"] = cache
        return forward(self, *args, **kwargs)
    return forward_taking_cache


def install() -> list[str]:
    """Patch FLA for CPU; idempotent. Returns the substitutions made (one line each)."""
    global _installed
    if _installed is not None:
        return _installed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Triton is not supported on current platform"
        import transformers
        import fla.layers.kda as fla_kda_layer
        import fla.modules.mlp as fla_mlp
        from fla.models.kda.modeling_kda import KDAForCausalLM
        from fla.modules import FusedRMSNormGated, ShortConvolution
    done = []
    fla_kda_layer.chunk_kda = torch_kda
    fla_kda_layer.fused_recurrent_kda = torch_kda
    done.append("fla.layers.kda.chunk_kda, fused_recurrent_kda -> torch l2norm + naive_kda_gate + sigmoid "
                "+ fla.ops.kda.naive.naive_recurrent_kda")
    ShortConvolution.forward = _short_conv_forward
    done.append("ShortConvolution.forward (Triton causal_conv1d; FLA has no torch fallback) "
                "-> torch depthwise conv1d + SiLU")
    FusedRMSNormGated.forward = _rms_norm_gated_forward
    done.append("FusedRMSNormGated.forward (o_norm) -> torch rmsnorm * w * sigmoid(g)")
    fla_mlp.swiglu = _swiglu
    done.append("fla.modules.mlp.swiglu (Triton SwiGLUFunction) -> torch silu(gate) * up")
    done.append("config fuse_norm=False -> torch.nn.RMSNorm (attn_norm, mlp_norm, model.norm)")
    done.append("config fuse_swiglu=False -> unfused GatedMLP (down_proj as nn.Linear)")
    done.append("config fuse_cross_entropy=False -> torch.nn.CrossEntropyLoss")
    tied = getattr(KDAForCausalLM, "_tied_weights_keys", None)
    major = int(transformers.__version__.split(".")[0])
    if major >= 5 and isinstance(tied, (list, tuple)):
        KDAForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}
        done.append("KDAForCausalLM._tied_weights_keys: transformers-4 list -> transformers-5 dict")
    if major >= 5 and "cache" not in inspect.signature(KDAForCausalLM.forward).parameters:
        KDAForCausalLM.forward = _forward_taking_cache(KDAForCausalLM.forward)
        done.append("KDAForCausalLM.forward: transformers-5 `cache=` passed on as past_key_values")
    _installed = done
    return done
