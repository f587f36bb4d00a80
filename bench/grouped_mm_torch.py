#!/usr/bin/env python3
"""EPO's expert GEMMs against torch._grouped_mm on the same shapes and the same GPU.

Reads the samples file of `epo calibrate bench --for ...` (grouped_gemm rows that carry "product"
and "pass"), times torch._grouped_mm for each (experts, rows per expert, hidden, ffn, product,
pass), and prints both rates and their ratio (torch time / EPO time; >= 1.0 means EPO is as fast).
EPO's wgrad accumulates into the gradient (the GEMM reads and writes it, as Megatron's gradient
accumulation does): it is compared with torch's product added into a gradient (the same work);
the "fresh" rows (samples with "accumulate": false) are EPO's product written alone, compared with
torch's fresh product.

  python3 bench/grouped_mm_torch.py SAMPLES.json [--iters 20] [--json OUT.json]

Shapes: fc1 is [rows x hidden] x [hidden x 2*ffn], fc2 [rows x ffn] x [ffn x hidden], per expert;
dgrad is dy [rows x n] x w^T, wgrad x^T [k x rows] x dy [rows x n] summed into [k x n] per expert.
Times are the median of --iters timed calls after 5 untimed ones (CUDA events), on random data.
"""
import argparse
import json
import statistics
import sys

import torch


def time_us(fn, iters):
    for _ in range(5):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(1000.0 * a.elapsed_time(b))
    return statistics.median(times)


def torch_case(experts, rows, n, k, pass_, iters):
    dev = "cuda"
    m = experts * rows
    offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * rows
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(experts, k, n, device=dev, dtype=torch.bfloat16) * 0.02
    if pass_ == "fwd":
        fn = lambda: torch._grouped_mm(x, w, offs=offs)
    elif pass_ == "dgrad":
        wt = w.transpose(-2, -1)  # [E][n][k], a transposed view as autograd passes it
        fn = lambda: torch._grouped_mm(dy, wt, offs=offs)
    elif pass_ == "fresh":
        xt = x.t()  # [k][m]
        fn = lambda: torch._grouped_mm(xt, dy, offs=offs)
    else:  # "wgrad": accumulated into the gradient, as EPO's wgrad is (beta = 1)
        xt = x.t()
        dw = torch.zeros(experts, k, n, device=dev, dtype=torch.bfloat16)
        fn = lambda: dw.add_(torch._grouped_mm(xt, dy, offs=offs))
    return time_us(fn, iters)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    doc = json.load(open(a.samples))
    # EPO's best launch per (shape, pass): what `auto` would pick at best.
    best = {}
    for s in doc["samples"]:
        if s.get("bench") != "grouped_gemm" or "product" not in s:
            continue
        pass_ = s.get("pass", "fwd")
        if pass_ == "wgrad" and s.get("accumulate", True) is False:
            pass_ = "fresh"
        key = (s["num_experts"], int(s["tokens_per_expert"]), int(s["hidden"]), int(s["ffn"]),
               s["product"], pass_)
        if key not in best or s["time_us"] < best[key][0]:
            best[key] = (s["time_us"], s["launch"])
    if not best:
        sys.exit("no grouped_gemm rows with 'product' in %s (run epo calibrate bench --for)" %
                 a.samples)
    print("# device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    print("%8s %6s %6s %5s %4s %5s | %10s %8s %10s | %10s %8s | %5s" %
          ("experts", "rows", "hidden", "ffn", "prod", "pass", "epo_us", "TFLOP/s", "launch",
           "torch_us", "TFLOP/s", "ratio"))
    rows_out = []
    for (e, t, h, f, prod, pass_), (epo_us, launch) in sorted(best.items()):
        n, k = (2 * f, h) if prod == "fc1" else (h, f)
        flops = 2.0 * e * t * n * k
        try:
            tus = torch_case(e, t, n, k, pass_, a.iters)
        except Exception as ex:  # an unsupported layout is reported, not fatal
            print("%8d %6d %6d %5d %4s %5s | torch failed: %s" % (e, t, h, f, prod, pass_, ex))
            continue
        ratio = tus / epo_us
        print("%8d %6d %6d %5d %4s %5s | %10.1f %8.1f %10s | %10.1f %8.1f | %5.2f" %
              (e, t, h, f, prod, pass_, epo_us, flops / epo_us / 1e6, launch, tus,
               flops / tus / 1e6, ratio))
        rows_out.append({"num_experts": e, "tokens_per_expert": t, "hidden": h, "ffn": f,
                         "product": prod, "pass": pass_, "epo_us": epo_us, "epo_launch": launch,
                         "torch_us": tus, "ratio_torch_over_epo": ratio})
    if a.json:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "rows": rows_out}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
