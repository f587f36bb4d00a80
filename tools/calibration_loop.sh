#!/usr/bin/env bash
# The calibration loop: microbenchmarks, short `epo run` measurements, a fit on half of them and
# the predicted-vs-measured report on the other half.
#
#   tools/calibration_loop.sh OUT_DIR            (EPO_BIN=path/to/epo to choose the program)
#   LOOP_GPUS=2 tools/calibration_loop.sh OUT_DIR   (EP over real GPUs instead of virtual ranks)
#   LOOP_FOR=plan.json tools/calibration_loop.sh OUT_DIR   (also benchmark the shapes of the job
#     you plan: `epo calibrate bench --for`, a configuration/plan file or its flags in one string)
#
# One GPU (default): {tiny, Qwen3-30B-A3B (2 layers)} x virtual ranks {2, 4, 8} x dispatcher
# {alltoall, flex} x {overlap off, overlap on, overlap on + delayed wgrad}: 36 configurations;
# each (model, ranks) group has one token count (of two) and one routing (balanced or skewed), so
# both appear for both models. LOOP_GPUS=N (N >= 2): EP N over N GPUs (a thread per GPU, NCCL and
# flex over the links; microbenchmarks with --gpus N), two groups per model, each with its own
# token count and routing (Qwen3 at 4096 and 8192 tokens): 24 configurations. Groups, not
# single runs, are split into halves so that every pair of runs differing only in dispatcher or
# overlap flags is ranked inside the held-back half. Every run is repeated LOOP_REPEATS times
# (default 3; the launch-bound tiny model LOOP_TINY_REPEATS times, default 5, since its runs
# differ more from process to process), each in its own process and the repeats interleaved in
# time; fit and report take
# the median of a configuration's repeats and show how far apart they were. Budget: the whole loop
# stays under ~9 minutes on one H200 (runs still pending at LOOP_BUDGET_S are skipped and listed).
set -uo pipefail

out=${1:?usage: tools/calibration_loop.sh OUT_DIR}
epo=${EPO_BIN:-$(dirname "$0")/../build/cli/epo}
budget_s=${LOOP_BUDGET_S:-480}
iters=${LOOP_ITERS:-3}
warmup=${LOOP_WARMUP:-1}
repeats=${LOOP_REPEATS:-3}
tiny_repeats=${LOOP_TINY_REPEATS:-5}
gpus=${LOOP_GPUS:-1}
microbatches=4
case $gpus in ''|*[!0-9]*) echo "calibration_loop: LOOP_GPUS must be a number, got '$gpus'" >&2; exit 2 ;; esac

mkdir -p "$out/fit" "$out/report" "$out/logs"
: > "$out/commands.txt"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
log() { echo "[$(elapsed)s] $*" | tee -a "$out/loop.log" >&2; }
run_cmd() {  # run_cmd LOGFILE TIMEOUT_S CMD...
  local logfile=$1 limit=$2
  shift 2
  echo "$*" >> "$out/commands.txt"
  timeout "$limit" "$@" > "$logfile" 2>&1
}

[ -x "$epo" ] || { echo "calibration_loop: no epo program at $epo (set EPO_BIN)" >&2; exit 2; }
{
  echo "date: $(date -u +%FT%TZ)"
  echo "epo: $epo"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
  # The revision only of a checkout whose top is this source tree (not of an enclosing one).
  src=$(cd "$(dirname "$0")/.." && pwd)
  if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
    git -C "$src" rev-parse --short=12 HEAD
  else
    echo "revision: unknown (not a git checkout)"
  fi
} > "$out/context.txt"

log "microbenchmarks (quick)"
bench_gpus=()
[ "$gpus" -ge 2 ] && bench_gpus=(--gpus "$gpus")
[ -n "${LOOP_FOR:-}" ] && bench_gpus+=(--for "$LOOP_FOR")
if ! run_cmd "$out/logs/bench.log" 240 "$epo" calibrate bench --quick "${bench_gpus[@]}" \
    --out "$out/samples.json"; then
  log "epo calibrate bench failed (see logs/bench.log); stopping"
  exit 1
fi

models=(tiny qwen3-30b-a3b)
layers=(2 2)
tokens_tiny=(1024 4096)
if [ "$gpus" -ge 2 ]; then
  # Two groups per model on all GPUs: (tiny 1024 balanced: fit, tiny 4096 skewed: report, Qwen3
  # 8192 skewed: fit, Qwen3 4096 balanced: report).
  tokens_qwen=(4096 8192)
  ranks=("$gpus" "$gpus")
  seq_of_group=(0 1 1 0)
  skewed_group=(0 1 1 0)
  placement() { echo --gpus "$1" --ep "$1" --no-raw-alltoall; }
else
  tokens_qwen=(1024 2048)
  ranks=(2 4 8)
  # Per group (tiny r2, r4, r8, qwen r2, r4, r8): token count and routing chosen so that each half
  # (even groups fit, odd groups report) and each model has both token counts and both routings.
  seq_of_group=(0 0 1 1 0 1)
  skewed_group=(0 1 1 0 1 0)
  placement() { echo --virtual-ranks "$1"; }
fi
failed=()
skipped=()
for rep in $(seq 1 $(( repeats > tiny_repeats ? repeats : tiny_repeats ))); do
group=0
for mi in 0 1; do
  model=${models[$mi]}
  model_repeats=$([ "$mi" -eq 0 ] && echo "$tiny_repeats" || echo "$repeats")
  if [ "$rep" -gt "$model_repeats" ]; then group=$((group + ${#ranks[@]})); continue; fi
  for r in "${ranks[@]}"; do
    if [ "$mi" -eq 0 ]; then seq=${tokens_tiny[${seq_of_group[$group]}]}; else seq=${tokens_qwen[${seq_of_group[$group]}]}; fi
    if [ "${skewed_group[$group]}" -eq 0 ]; then routing=(--routing balanced); rname=bal
    else routing=(--routing skewed --skew 1.2); rname=skew; fi
    half=$([ $((group % 2)) -eq 0 ] && echo fit || echo report)
    for disp in alltoall flex; do
      for variant in off on on_dw; do
        case $variant in
          off) flags=() ;;
          on) flags=(--overlap) ;;
          on_dw) flags=(--overlap --delay-wgrad) ;;
        esac
        name="${model}_r${r}_${disp}_${variant}_s${seq}_${rname}_rep${rep}"
        if [ "$(elapsed)" -ge "$budget_s" ]; then
          skipped+=("$name")
          continue
        fi
        log "run $name -> $half"
        if ! run_cmd "$out/logs/$name.log" 120 "$epo" run --model "$model" --hardware h200-sxm \
            $(placement "$r") --dispatcher "$disp" "${flags[@]}" --seq "$seq" --mbs 1 \
            --gbs $((microbatches * r)) "${routing[@]}" --layers "${layers[$mi]}" \
            --iters "$iters" --warmup "$warmup" --json "$out/$half/$name.json"; then
          failed+=("$name")
          rm -f "$out/$half/$name.json"
          log "  failed (see logs/$name.log)"
        fi
      done
    done
    group=$((group + 1))
  done
done
done

log "fit on $(ls "$out"/fit/*.json 2>/dev/null | wc -l) runs, report on $(ls "$out"/report/*.json 2>/dev/null | wc -l)"
run_cmd "$out/fit.txt" 120 "$epo" calibrate fit "$out/samples.json" "$out"/fit/*.json \
  --base h200-sxm --out "$out/profile.json" || log "fit failed (see fit.txt)"
if [ -f "$out/profile.json" ] && ls "$out"/report/*.json > /dev/null 2>&1; then
  run_cmd "$out/report.txt" 120 "$epo" calibrate report --profile "$out/profile.json" \
    "$out"/report/*.json --base h200-sxm --json "$out/report.json" || log "report failed (see report.txt)"
  # The fitted half too, for comparison (not the held-back figure).
  run_cmd "$out/report_fit_half.txt" 120 "$epo" calibrate report --profile "$out/profile.json" \
    "$out"/fit/*.json --base h200-sxm || true
fi
{
  echo "elapsed_s: $(elapsed)"
  echo "failed: ${failed[*]:-none}"
  echo "skipped (budget): ${skipped[*]:-none}"
} | tee "$out/summary.txt"
log "done; the held-back summary is at the end of $out/report.txt"
[ ${#failed[@]} -eq 0 ]
