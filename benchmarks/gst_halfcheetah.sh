#!/usr/bin/env bash
# TD3 on HalfCheetah-v5: dense vs iterative (polynomial) pruning vs GST at one
# step budget, over one or more seeds; prints final return and average
# compression ratio per seed and their means, writes JSON.
#
#   STEPS=1000000 benchmarks/gst_halfcheetah.sh                 # the paper's budget
#   STEPS=70000 SEEDS="0 1 2" PARALLEL=1 GST_WINDOW=3 benchmarks/gst_halfcheetah.sh
#   STEPS=20000 START=5000 benchmarks/gst_halfcheetah.sh        # a short smoke budget
#
# Env: STEPS (env steps, default 1000000), START (random steps, default
# 10000), OUT (default /tmp/tfrl_gst_halfcheetah), SEEDS (default "0"; one
# after the other, each in OUT/seed<S>), PYTHON,
# PARALLEL (1: a seed's runs at once under `nice`, one TF thread each;
# default 0), METHODS (default "dense iterative_pruning gst
# gst_b64_dst_inputs_c80"; any other method is the preset
# flags/td3_halfcheetah_<method>.flags, e.g. gst_b32, or the ablation
# benchmarks/ablations/td3_halfcheetah_<method>.flags, e.g. gst_b64; each
# preset's header says what it changes and what it measured),
# GST_WINDOW (episodes per reward-aware decision, default the preset's 10; 3
# suits budgets under ~100k steps), GST_STEP_UP / GST_STEP_DOWN (the
# reward-aware rule's sparsity steps, default the preset's 0.05 / 0.1, sized
# for 1M steps; see the README for short budgets), TABLE_ONLY (1: only print
# the table of finished runs), CHECKPOINT_EVERY (env steps,
# default STEPS), RESUME (1: carry on from the runs' checkpoints in OUT; without
# it a run whose logdir already holds a checkpoint refuses to start),
# NICE (niceness under PARALLEL, default 10).
# Ctrl-C / SIGTERM stop the runs with a checkpoint; RESUME=1 continues them.
# The return is the mean of 5 deterministic episodes after training.
# OUT/results.json also holds "provenance" (commit, command, CPU, cores, date),
# taken when the runs start (OUT/provenance.json; if OUT has none, now).
# Pruning schedules count training iterations (= STEPS - START); both
# iterative pruning and GST's reward-aware pruning end at 80 % of them.
set -euo pipefail
cd "$(dirname "$0")/.."
# The command as given, with the settings read from the environment.
COMMAND="benchmarks/gst_halfcheetah.sh"
for v in NICE RESUME CHECKPOINT_EVERY TABLE_ONLY GST_STEP_DOWN GST_STEP_UP GST_WINDOW METHODS \
  PARALLEL SEEDS OUT START STEPS; do
  if [[ -n "${!v:-}" ]]; then COMMAND="$v=$(printf '%q' "${!v}") $COMMAND"; fi
done
STEPS=${STEPS:-1000000}
START=${START:-10000}
OUT=${OUT:-/tmp/tfrl_gst_halfcheetah}
read -r -a seeds <<< "${SEEDS:-0}"
PYTHON=${PYTHON:-python}
ITERS=$((STEPS - START))
END=$((ITERS * 8 / 10))
FREQ=$((ITERS / 40 > 1000 ? 1000 : (ITERS / 40 > 0 ? ITERS / 40 : 1)))
common=(--total_steps="$STEPS" --start_steps="$START" --eval_every=0
        --eval_episodes=5 --checkpoint_every="${CHECKPOINT_EVERY:-$STEPS}" --log_every=$((STEPS / 20))
        --pruning_begin=0 --pruning_end="$END" --pruning_frequency="$FREQ" --jit_compile)
[[ "${RESUME:-0}" == 1 ]] && common+=(--resume)
[[ -n "${GST_WINDOW:-}" ]] && common+=(--gst_window="$GST_WINDOW")
[[ -n "${GST_STEP_UP:-}" ]] && common+=(--gst_step_up="$GST_STEP_UP")
[[ -n "${GST_STEP_DOWN:-}" ]] && common+=(--gst_step_down="$GST_STEP_DOWN")
PARALLEL=${PARALLEL:-0}
read -r -a methods <<< "${METHODS:-dense iterative_pruning gst gst_b64_dst_inputs_c80}"
# A method's preset is flags/td3_halfcheetah_<method>.flags (a preset to start
# from) or benchmarks/ablations/td3_halfcheetah_<method>.flags (an ablation),
# except these two.
declare -A flagfile=([dense]=td3_halfcheetah [iterative_pruning]=td3_halfcheetah_pruning)
preset() {
  local name="${flagfile[$1]:-td3_halfcheetah_$1}.flags"
  if [[ ! -f "flags/$name" && -f "benchmarks/ablations/$name" ]]; then
    echo "benchmarks/ablations/$name"
  else echo "flags/$name"; fi
}
for m in "${methods[@]}"; do
  [[ -f "$(preset "$m")" ]] || { echo "METHODS: no preset $(preset "$m") for '$m'; methods:" \
    "dense iterative_pruning $(ls flags/td3_halfcheetah_gst*.flags benchmarks/ablations/td3_halfcheetah_gst*.flags \
      | sed 's|^.*/td3_halfcheetah_||; s/\.flags$//' | tr '\n' ' ')" >&2; exit 2; }
done
run() {  # run METHOD SEED
  local name=$1 seed=$2 dir="$OUT/seed$2"
  mkdir -p "$dir"
  echo "== $name, seed $seed" >&2
  PYTHONPATH=. "$PYTHON" -m tfrl.td3 --flagfile="$(preset "$name")" "${common[@]}" \
    --seed="$seed" --logdir="$dir/$name" >> "$dir/$name.log" 2>&1 \
    || { tail -20 "$dir/$name.log" >&2; return 1; }
}
if [[ "${TABLE_ONLY:-0}" != 1 ]]; then
  mkdir -p "$OUT"
  "$PYTHON" benchmarks/provenance.py "$COMMAND" > "$OUT/provenance.json" 2>/dev/null
  for seed in "${seeds[@]}"; do
    if [[ "$PARALLEL" == 1 ]]; then
      # Separate processes share the cores; one intra-op thread each avoids
      # oversubscription, `nice` keeps the machine usable meanwhile.
      export TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
      pids=()
      for m in "${methods[@]}"; do nice -n "${NICE:-10}" bash -c "$(declare -f run preset); \
        $(declare -p common flagfile); OUT='$OUT' PYTHON='$PYTHON' STEPS='$STEPS' run $m $seed" &
        pids+=($!); done
      # Background jobs ignore the terminal's Ctrl-C: pass it on to the runs.
      # SIGTERM: background jobs ignore SIGINT until TD3 installs its handler.
      trap 'pkill -TERM -f -- "--logdir=$OUT/" || true; exit 130' INT TERM
      for p in "${pids[@]}"; do wait "$p" || wait "$p"; done
    else
      for m in "${methods[@]}"; do run "$m" "$seed"; done
    fi
  done
fi
COMMAND="$COMMAND" "$PYTHON" - "$OUT" "$STEPS" "${#seeds[@]}" "${seeds[@]}" "${methods[@]}" <<'PY'
import json, math, os, sys
sys.path.insert(0, os.getcwd())
from benchmarks import provenance
out, steps, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seeds, names = sys.argv[4:4 + n], sys.argv[4 + n:]
rows = {m: {s: json.load(open(f"{out}/seed{s}/{m}/summary.json")) for s in seeds} for m in names}
w = max(len(m) for m in names + ["method"])  # method column width
print(f"TD3 HalfCheetah-v5, {steps} env steps, seeds {' '.join(seeds)}")
print(f"{'method':<{w}} {'seed':>4} {'eval return':>11} {'train ret(10)':>13} {'avg compr.':>10} "
      f"{'final compr.':>12} {'stored params':>13} {'policy bytes':>12} {'wall s':>7}")
means = {}
for m, by_seed in rows.items():
  done = {s: r for s, r in by_seed.items() if r.get("completed", True)}
  for s, r in by_seed.items():
    if s not in done:
      print(f"{m:<{w}} {s:>4} stopped at step {r['env_steps']}; finish it with RESUME=1")
      continue
    tr = r['train_return_last10']
    tr = float('nan') if tr is None else tr
    print(f"{m:<{w}} {s:>4} {r['eval_return']:>11.1f} {tr:>13.1f} "
          f"{100 * r['average_compression_ratio']:>9.1f}% {100 * r['final_compression_ratio']:>11.1f}% "
          f"{r['stored_params']:>13d} {r['policy_compressed_bytes']:>12d} {r['wall_seconds']:>7.0f}")
  if len(done) > 1:
    mean = lambda k: sum(r[k] for r in done.values()) / len(done)
    means[m] = {"seeds": len(done), "eval_return": mean("eval_return"),
                "average_compression_ratio": mean("average_compression_ratio"),
                "final_compression_ratio": mean("final_compression_ratio")}
    print(f"{m:<{w}} {'mean':>4} {means[m]['eval_return']:>11.1f} {'':>13} "
          f"{100 * means[m]['average_compression_ratio']:>9.1f}% "
          f"{100 * means[m]['final_compression_ratio']:>11.1f}%")
if os.path.exists(f"{out}/provenance.json"):
  record = json.load(open(f"{out}/provenance.json"))
else:
  record = provenance.provenance(os.environ["COMMAND"])
json.dump({"provenance": record, "steps": steps, "seeds": seeds, "means": means,
           "runs": {m: {s: {k: v for k, v in r.items() if k != "layers"} for s, r in by_seed.items()}
                    for m, by_seed in rows.items()}},
          open(f"{out}/results.json", "w"), indent=1)
print(f"JSON: {out}/results.json")
PY
