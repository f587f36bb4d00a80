#!/usr/bin/env python3
"""Rates of the kernels a Megatron MoE layer runs, measured with PyTorch on one GPU.

What the cost model takes from a GPU's datasheet times an efficiency: fused attention forward and
backward (causal, by head dims and sequence), BF16 and FP8 (per-tensor scaled) GEMMs by shape, and
the memory-bound kernels around them (RMSNorm, SwiGLU, FP8 cast, a token gather). Prints one line
per case and, with --json, writes {"gpu": ..., "cases": [...]} for docs/measurements.md.

  python3 bench/kernel_rates_torch.py [--iters 20] [--json OUT.json]

Times are the median of --iters timed calls after 5 untimed ones (CUDA events), on random data.
Attention FLOPs count causal work (half the score matrix): forward 2 * 2 * T * S/2 * heads * d,
backward 2.5 times that (the recomputed scores, dQ, dK, dV).
"""
import argparse
import json

import torch
import torch.nn.functional as F

from grouped_mm_torch import time_us  # the same CUDA-event timing (bench/)


def attention_cases(iters, peak):
    out = []
    # (heads, qk dim, v dim, sequence): GQA/MHA of Qwen3 and Mixtral-like models, MLA of DeepSeek.
    shapes = [(32, 128, 128, 4096), (64, 128, 128, 4096), (16, 128, 128, 4096),
              (128, 192, 128, 4096), (64, 192, 128, 4096), (32, 128, 128, 8192),
              (32, 128, 128, 1024), (8, 128, 128, 1024)]
    backends = {"flash": torch.nn.attention.SDPBackend.FLASH_ATTENTION,
                "cudnn": torch.nn.attention.SDPBackend.CUDNN_ATTENTION,
                "efficient": torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION}
    for heads, dqk, dv, seq in shapes:
        q = torch.randn(1, heads, seq, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1, heads, seq, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1, heads, seq, dv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        fwd_flops = 2.0 * seq * (seq / 2) * heads * (dqk + dv)
        for name, be in backends.items():
            try:
                with torch.nn.attention.sdpa_kernel([be]):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    g = torch.randn_like(o)
                    f_us = time_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                   iters)

                    def fb():
                        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        y.backward(g)
                    fb_us = time_us(fb, iters)
            except Exception as e:  # a backend that does not take this shape
                out.append({"kind": "attention", "backend": name, "heads": heads, "dqk": dqk,
                            "dv": dv, "seq": seq, "error": str(e).splitlines()[0][:120]})
                continue
            b_us = max(1e-3, fb_us - f_us)
            out.append({"kind": "attention", "backend": name, "heads": heads, "dqk": dqk, "dv": dv,
                        "seq": seq, "fwd_us": f_us, "bwd_us": b_us,
                        "fwd_tflops": fwd_flops / f_us / 1e6,
                        "bwd_tflops": 2.5 * fwd_flops / b_us / 1e6,
                        "fwd_eff": fwd_flops / f_us / 1e6 / peak,
                        "bwd_eff": 2.5 * fwd_flops / b_us / 1e6 / peak})
            q.grad = k.grad = v.grad = None
    return out


def gemm_cases(iters, peak):
    out = []
    shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 1536, 2048), (4096, 2048, 768),
              (32768, 1536, 2048), (32768, 2048, 768), (16384, 4096, 7168), (16384, 7168, 2048),
              (4096, 5120, 4096), (4096, 4096, 4096), (2048, 3072, 7168), (65536, 3072, 4096)]
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * m * n * k
        bf_us = time_us(lambda: a @ b.t(), iters)
        rec = {"kind": "gemm", "m": m, "n": n, "k": k, "bf16_us": bf_us,
               "bf16_tflops": flops / bf_us / 1e6, "bf16_eff": flops / bf_us / 1e6 / peak}
        try:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda", dtype=torch.float32)
            f8_us = time_us(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                     out_dtype=torch.bfloat16), iters)
            rec.update({"fp8_us": f8_us, "fp8_tflops": flops / f8_us / 1e6,
                        "fp8_eff_of_fp8_peak": flops / f8_us / 1e6 / (2 * peak)})
            # Current scaling as TE does it per GEMM input: amax, then a scaled cast.
            def quant():
                s = a.abs().amax().float()
                return (a * (448.0 / s)).to(torch.float8_e4m3fn)
            q_us = time_us(quant, iters)
            rec.update({"quantize_us": q_us, "quantize_gbps": m * k * 5 / q_us / 1e3})
        except Exception as e:
            rec["fp8_error"] = str(e).splitlines()[0][:120]
        out.append(rec)
    return out


def memory_cases(iters):
    out = []
    for tokens, h in [(4096, 2048), (4096, 4096), (4096, 7168), (32768, 2048), (32768, 7168)]:
        x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(h, device="cuda", dtype=torch.bfloat16)
        norm = torch.nn.functional.rms_norm
        us = time_us(lambda: norm(x, (h,), w, 1e-6), iters)
        out.append({"kind": "rmsnorm", "tokens": tokens, "hidden": h, "us": us,
                    "gbps": tokens * h * 4 / us / 1e3})
        y = torch.randn(tokens, 2 * h, device="cuda", dtype=torch.bfloat16)
        us = time_us(lambda: F.silu(y[:, :h]) * y[:, h:], iters)
        out.append({"kind": "swiglu", "tokens": tokens, "hidden": h, "us": us,
                    "gbps": tokens * h * 6 / us / 1e3})
        idx = torch.randint(0, tokens, (tokens * 4,), device="cuda")
        us = time_us(lambda: x.index_select(0, idx), iters)
        out.append({"kind": "gather4", "tokens": tokens, "hidden": h, "us": us,
                    "gbps": tokens * 4 * h * 4 / us / 1e3})
        us = time_us(lambda: x.to(torch.float8_e4m3fn), iters)
        out.append({"kind": "cast_fp8", "tokens": tokens, "hidden": h, "us": us,
                    "gbps": tokens * h * 3 / us / 1e3})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    peak = 989.4  # dense BF16 TFLOP/s of the GH100 die (H100 SXM / H200)
    cases = attention_cases(a.iters, peak) + gemm_cases(a.iters, peak) + memory_cases(a.iters)
    for c in cases:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in c.items()}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": props.name, "torch": torch.__version__, "bf16_peak_tflops": peak,
                       "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
