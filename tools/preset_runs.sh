#!/usr/bin/env bash
# One MoE layer of every model preset on one GPU: `epo run --dry-run` (the memory plan), then
# `epo run` itself, and a table of the planned memory against what the run allocated and held on
# the device, and of the measured step time against the predicted one.
#
#   tools/preset_runs.sh OUT_DIR            (EPO_BIN=path/to/epo to choose the program)
#
# Shape (the executor's sizing target): 8 virtual ranks, 2 micro-batches of 4096 tokens per rank,
# overlap and delayed wgrad (both schedules run), alltoall; gpt-oss-120b also on 4 virtual ranks
# at 8192 tokens. PRESET_RUNS_EXTRA adds flags to every run (e.g. "--dispatcher flex").
set -uo pipefail

out=${1:?usage: tools/preset_runs.sh OUT_DIR}
epo=${EPO_BIN:-$(dirname "$0")/../build/cli/epo}
extra=${PRESET_RUNS_EXTRA:-}
[ -x "$epo" ] || { echo "preset_runs: no epo program at $epo (set EPO_BIN)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/commands.txt"

one() {  # one NAME RANKS SEQ MODEL
  local name=$1 ranks=$2 seq=$3 model=$4
  local flags="--model $model --hardware h200-sxm --gpus $ranks --virtual-ranks $ranks --ep $ranks \
--moe-layers 1 --seq $seq --mbs 1 --gbs $((2 * ranks)) --overlap --delay-wgrad --iters 3 --warmup 1 $extra"
  echo "$epo run $flags --dry-run --json $out/$name.plan.json" >> "$out/commands.txt"
  "$epo" run $flags --dry-run --json "$out/$name.plan.json" > "$out/$name.plan.txt" 2>&1
  echo "$epo run $flags --json $out/$name.run.json" >> "$out/commands.txt"
  timeout 240 "$epo" run $flags --json "$out/$name.run.json" > "$out/$name.run.txt" 2>&1
  echo "$name: exit $?" >> "$out/status.txt"
}

: > "$out/status.txt"
for m in deepseek-v3 kimi-k2 qwen3-235b-a22b qwen3-30b-a3b qwen2-57b-a14b mixtral-8x22b \
         mixtral-8x7b gpt-oss-120b moonlight-16b-a3b; do
  one "$m" 8 4096 "$m"
done
one gpt-oss-120b-r4-8192 4 8192 gpt-oss-120b

python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
names = [l.split(":")[0] for l in open(os.path.join(out, "status.txt"))]
codes = dict(l.strip().split(": exit ") for l in open(os.path.join(out, "status.txt")))
print(f"{'run':24} {'exit':>4} {'plan GB':>8} {'alloc GB':>8} {'in use GB':>9} "
      f"{'use/plan':>8} {'step ms':>8} {'pred ms':>8} {'err %':>6}")
for n in names:
    plan = run = None
    try:
        plan = json.load(open(os.path.join(out, n + ".plan.json")))
    except Exception:
        pass
    try:
        run = json.load(open(os.path.join(out, n + ".run.json")))
    except Exception:
        pass
    planned = (plan["device_bytes"] - plan["reserve_bytes"]) / 1e9 if plan else float("nan")
    alloc = used = step = pred = float("nan")
    if run:
        alloc = sum(run["summary"]["peak_memory_bytes"]) / 1e9
        du = run["run"].get("device_used_bytes", [])
        used = max(du) / 1e9 if du else float("nan")
        step = run["summary"]["step_time_us"] / 1e3
        pred = run["prediction"]["step_time_us"] / 1e3
    err = 100.0 * (step - pred) / pred if run else float("nan")
    print(f"{n:24} {codes.get(n, '?'):>4} {planned:8.2f} {alloc:8.2f} {used:9.2f} "
          f"{used / planned if plan and run else float('nan'):8.3f} {step:8.2f} {pred:8.2f} {err:6.1f}")
EOF
