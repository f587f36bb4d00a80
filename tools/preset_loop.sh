#!/usr/bin/env bash
# A blind calibration loop across models: one MoE layer of every preset on this GPU
# (tools/preset_runs.sh), microbenchmarks, a fit on half of the presets' runs and the
# predicted-against-measured report on the other half — models the fit never saw. With
# PRESET_LOOP_FOR=1 the microbenchmarks also measure the held-back presets' own shapes
# (`epo calibrate bench --for`, as a user does for the model they plan).
#
#   tools/preset_loop.sh OUT_DIR            (EPO_BIN=path/to/epo to choose the program)
#
# The halves are fixed here, before any run: the fit on DeepSeek-V3, Qwen3-30B-A3B, Mixtral-8x7B,
# gpt-oss-120b and Moonlight-16B; the report on Kimi-K2, Qwen3-235B-A22B, Qwen2-57B-A14B,
# Mixtral-8x22B and gpt-oss-120b on 4 ranks at 8,192 tokens.
set -uo pipefail

out=${1:?usage: tools/preset_loop.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
epo=${EPO_BIN:-$here/../build/cli/epo}
[ -x "$epo" ] || { echo "preset_loop: no epo program at $epo (set EPO_BIN)" >&2; exit 2; }
mkdir -p "$out/fit" "$out/report"
fit_half=(deepseek-v3 qwen3-30b-a3b mixtral-8x7b gpt-oss-120b moonlight-16b-a3b)
report_half=(kimi-k2 qwen3-235b-a22b qwen2-57b-a14b mixtral-8x22b gpt-oss-120b-r4-8192)

EPO_BIN=$epo "$here/preset_runs.sh" "$out/presets" > "$out/preset_runs.txt" 2>&1
for n in "${fit_half[@]}"; do cp "$out/presets/$n.run.json" "$out/fit/" 2>/dev/null; done
for n in "${report_half[@]}"; do cp "$out/presets/$n.run.json" "$out/report/" 2>/dev/null; done

bench=(--quick)
if [ "${PRESET_LOOP_FOR:-0}" = 1 ]; then
  shape="--hardware h200-sxm --seq 4096 --mbs 1 --overlap --delay-wgrad"
  for m in kimi-k2 qwen3-235b-a22b qwen2-57b-a14b mixtral-8x22b; do
    bench+=(--for "--model $m $shape --gpus 8 --virtual-ranks 8 --ep 8 --gbs 16")
  done
  bench+=(--for "--model gpt-oss-120b --hardware h200-sxm --seq 8192 --mbs 1 --overlap --delay-wgrad --gpus 4 --virtual-ranks 4 --ep 4 --gbs 8")
fi
"$epo" calibrate bench "${bench[@]}" --out "$out/samples.json" > "$out/bench.txt" 2>&1 ||
  { echo "preset_loop: epo calibrate bench failed (see $out/bench.txt)" >&2; exit 1; }
"$epo" calibrate fit "$out/samples.json" "$out"/fit/*.json --base h200-sxm \
  --out "$out/profile.json" > "$out/fit.txt" 2>&1 ||
  { echo "preset_loop: fit failed (see $out/fit.txt)" >&2; exit 1; }
"$epo" calibrate report --profile "$out/profile.json" "$out"/report/*.json --base h200-sxm \
  --json "$out/report.json" > "$out/report.txt" 2>&1
sed -n '/^summary over/,$p' "$out/report.txt"
