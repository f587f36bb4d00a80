#!/usr/bin/env python3
"""Writes tests/data/example_samples.json: calibration samples built from the H200 figures of
shared/reference/perf_anchors.md §6-7, completed by synthetic points where the reference has none.

Every sample says in the context block where it comes from. It stands in for a real
`epo calibrate bench` run until one is committed. Deterministic (fixed seed).
Usage: python3 tests/data/make_example_samples.py > tests/data/example_samples.json
"""
import json
import random

rng = random.Random(7)
GIB, MIB = 1 << 30, 1 << 20
PEAK_TFLOPS = 989.4
HBM_GBPS = 4800.0
LAUNCH_US = 2.4        # synthetic truth of the completed points
GEMM_EFF, GEMM_HALF = 0.80, 220.0
LOCAL_GBPS_PER_SM = 47.0
HBM_EFF = 0.8875


def noisy(x, rel=0.02):
    return x * (1.0 + rng.uniform(-rel, rel))


def f(x):
    return x / (x + GEMM_HALF)


def gemm_us(m, n, k, count=1):
    eff = min(GEMM_EFF, GEMM_EFF * f(m) * f(n) * f(k) / f(8192) ** 3)
    flops = 2.0 * m * n * k * count
    mem = (m * k + k * n + m * n) * 2.0 * count / (HBM_GBPS * HBM_EFF * 1e3)
    return max(flops / (PEAK_TFLOPS * eff * 1e6), mem) + LAUNCH_US


samples = []
# §6: bf16 GEMM 8192^3 at 782 TFLOP/s; 200 x GEMM 4096x2048x1536 in 8.18 ms.
samples.append({"bench": "gemm", "m": 8192, "n": 8192, "k": 8192, "time_us": 2 * 8192**3 / 782e6})
samples.append({"bench": "gemm", "m": 4096, "n": 2048, "k": 1536, "time_us": 8180.0 / 200})
# Synthetic dense GEMMs (Qwen3-30B-A3B attention/expert widths, token counts 256..16384).
for m in (256, 1024, 4096, 16384):
    for n, k in ((2048, 2048), (4096, 2048), (2048, 768)):
        samples.append({"bench": "gemm", "m": m, "n": n, "k": k, "time_us": noisy(gemm_us(m, n, k))})
# Synthetic grouped GEMMs: 8 experts, hidden 2048, expert ffn 768 (fc1: 2048 -> 2*768).
for tpe in (16, 64, 256, 1024, 4096):
    samples.append({"bench": "grouped_gemm", "tokens_per_expert": tpe, "num_experts": 8,
                    "hidden": 2048, "ffn": 768, "time_us": noisy(gemm_us(tpe, 1536, 2048, 8))})
# §6: copy kernel with 8/16/32/64/132 blocks moving 16 x 256 MiB; 1 GiB D2D copy at 4.26 TB/s
# (read + written).
for sms, ms in ((8, 11.20), (16, 5.87), (32, 3.51), (64, 2.51), (132, 2.15)):
    samples.append({"bench": "copy", "bytes": 16 * 256 * MIB, "sms": sms, "time_us": ms * 1e3})
samples.append({"bench": "copy", "bytes": GIB, "sms": 132, "time_us": 2 * GIB / 4.26e6})
# Synthetic local transport between virtual ranks (all ranks copy at once).
for ep in (2, 4, 8):
    for sms in (4, 8, 16):
        bpr = 16 * MIB
        total_sms = min(132, ep * sms)
        bw = min(total_sms * LOCAL_GBPS_PER_SM, HBM_GBPS * HBM_EFF / 2)
        t = LAUNCH_US + bpr * ep / (bw * 1e3)  # every rank copies all its parts
        samples.append({"bench": "transport", "kind": "local", "ep": ep, "bytes_per_rank": bpr,
                        "sms": sms, "time_us": noisy(t)})
# §7: ncclAlltoAll, 2 ranks, busbw by bytes per rank (t = bytes (n-1)/n / busbw).
for size, busbw in ((MIB, 25.6), (4 * MIB, 109), (16 * MIB, 171), (64 * MIB, 247),
                    (256 * MIB, 280), (GIB, 331)):
    samples.append({"bench": "transport", "kind": "nccl", "ep": 2, "bytes_per_rank": size,
                    "sms": 0, "time_us": size / 2 / (busbw * 1e3)})
# §7: store kernel to the peer, 16 x 256 MiB, by blocks (GB/s per direction).
for sms, gbps in ((2, 91), (4, 182), (8, 353), (16, 348), (32, 354), (132, 370)):
    samples.append({"bench": "transport", "kind": "flex", "ep": 2, "bytes_per_rank": 2 * 16 * 256 * MIB,
                    "sms": sms, "time_us": 16 * 256 * MIB / (gbps * 1e3)})
# §6: 10 x GEMM 8192^3 (15.97 ms alone) with the block-limited copy launched first.
for sms, alone, together in ((8, 11.20, 18.25), (16, 5.87, 17.70), (32, 3.51, 17.36),
                             (64, 2.51, 17.47), (132, 2.15, 17.96)):
    samples.append({"bench": "contention", "comm_sms": sms, "link": "local", "gemm_alone_us": 15970.0,
                    "comm_alone_us": alone * 1e3, "together_us": together * 1e3})
# §7: 10 x GEMM 8192^3 on each GPU (13.11 ms alone) with the store kernel to the peer.
for sms, alone, together in ((4, 24.52, 25.26), (8, 12.40, 14.75), (16, 12.62, 15.28),
                             (32, 12.39, 15.96), (132, 11.79, 23.62)):
    samples.append({"bench": "contention", "comm_sms": sms, "link": "nvlink", "gemm_alone_us": 13110.0,
                    "comm_alone_us": alone * 1e3, "together_us": together * 1e3})
# Synthetic launch and host synchronisation costs.
for _ in range(5):
    samples.append({"bench": "launch", "time_us": noisy(LAUNCH_US, 0.1)})
    samples.append({"bench": "host_sync", "time_us": noisy(9.0, 0.1)})

doc = {
    "schema_version": 1,
    "kind": "samples",
    "context": {
        "source": "SYNTHETIC from published figures: not an epo calibrate bench run",
        "gpu": "NVIDIA H200 (figures of shared/reference/perf_anchors.md §6-7)",
        "measured_figures": "gemm 8192^3 and 4096x2048x1536 (§6); copy by blocks and 1 GiB D2D (§6); "
                            "ncclAlltoAll busbw 1 MiB..1 GiB, store kernel by blocks (§7); "
                            "contention of 10 x GEMM 8192^3 with copies (§6) and NVLink stores (§7)",
        "synthetic_points": "other gemm and grouped_gemm shapes (efficiency 0.80, half-dim 220), "
                            "local transport (47 GB/s per SM), launch (2.4 us), host_sync (9 us); "
                            "uniform noise of +-2% (+-10% for launch and host_sync), seed 7",
        "left_out": "§6 contention with 200 x GEMM 4096x2048x1536: those GEMMs do not fill the GPU, "
                    "the model's contention curve describes saturating GEMMs",
        "generator": "tests/data/make_example_samples.py",
        "num_sms": 132,
        "gpus": 2,
    },
    "unmeasured": [],
    "samples": samples,
}
print(json.dumps(doc, indent=1))
