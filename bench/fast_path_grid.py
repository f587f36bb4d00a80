#!/usr/bin/env python3
"""The steady-state fast path against the full simulation over the option grid a planner walks.

For one base configuration (epo predict flags), every dispatcher (alltoall, HybridEP at 16 SMs,
DeepEP at 24), EP overlap with and without delayed wgrad and early attention release, TE graphs of
attention, router and preprocessing or none, and PP 1 or PP 2 x VPP 2, this runs `epo predict`
with and without `--fast` and prints the worst relative differences of the step time.

  EPO_BIN=build/cli/epo python3 bench/fast_path_grid.py \\
      "--model qwen3-30b-a3b --gpus 16 --ep 8 --gbs 512 --hardware dgx-h100" [--show 8]
"""
import argparse
import itertools
import os
import subprocess

GRAPHS = ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
          "attn,moe_router,moe_preprocess"]
DISPATCHERS = [["--dispatcher", "alltoall"],
               ["--dispatcher", "flex", "--flex-backend", "hybridep", "--comm-sms", "16"],
               ["--dispatcher", "flex", "--flex-backend", "deepep", "--comm-sms", "24"]]


def step_time_s(epo, args):
    p = subprocess.run([epo, "predict"] + args, capture_output=True, text=True)
    for line in p.stdout.splitlines():
        words = line.split()
        if words[:2] == ["step", "time"]:
            value, unit = float(words[2]), words[3]
            return value / 1000 if unit == "ms" else value
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="epo predict flags of the base configuration, one string")
    ap.add_argument("--show", type=int, default=8, help="how many of the worst to print")
    opts = ap.parse_args()
    epo = os.environ.get("EPO_BIN", "build/cli/epo")
    base = opts.base.split()
    rows = []
    for disp, ov, dw, er, g, (pp, vpp) in itertools.product(
            DISPATCHERS, [0, 1], [0, 1], [0, 1], [0, 1], [(1, 1), (2, 2)]):
        if not ov and (dw or er):
            continue
        args = (base + disp + (["--overlap"] if ov else []) + (["--delay-wgrad"] if dw else []) +
                (["--early-attn-release"] if er else []) + (GRAPHS if g else []) +
                ["--pp", str(pp), "--vpp", str(vpp)])
        fast, full = step_time_s(epo, args + ["--fast"]), step_time_s(epo, args)
        if fast and full:
            rows.append(((fast / full - 1) * 100, " ".join(args[len(base):])))
    rows.sort(key=lambda r: -abs(r[0]))
    print("%d configurations predicted (the others refused); worst |fast / full - 1|:" % len(rows))
    for err, args in rows[:opts.show]:
        print("  %+.3f %%  %s" % (err, args))


if __name__ == "__main__":
    main()
