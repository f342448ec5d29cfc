#!/usr/bin/env bash
# The device calls still to make for issues 11 and 13 (rewritten at stop 48), chosen by the card that comes (the
# device tool may give an H100 for an H200):
#   T=SECONDS bash benchmarks/gpu_next.sh   (T: the call's limit, as GPU_RUN_UNTIL is set from it)
# On an H200: issue 11's figures (23, 88, 40, dlrm/2 at full size, 5 evaluations each; 23 and 88 only in a short
# call; then test_gpu.py with what is left). On an H100: issue 13's lanes at --timing-budget 1.5, a first run to warm
# the baselines, then three lanes giving way during calls and at checkpoints only, and four lanes; the known-bad row
# 89:sleep_import under lanes; 88 at full size eight times (stop 48's intercept outlier).
set -u
export GPU_RUN_UNTIL=$(( $(date +%s) + ${T:-600} - 20 ))
left() { echo $(( GPU_RUN_UNTIL - $(date +%s) )); }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
if [[ $card == *H200* ]]; then
  P=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2
  (( $(left) < 450 )) && P=kernelbench/level1/23,kernelbench/level1/88
  TRUSTED_PROBLEMS=$P REPEATS=5 TRUSTED_LIMIT=330 TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  (( $(left) > 90 )) && TESTS_LIMIT=400 bash benchmarks/gpu_run.sh tests
  tail -n 30 /tmp/gpuout/trusted.log; tail -n 15 /tmp/gpuout/tests.log
else
  # RUNS: tag:preempt:pass_on[:lanes] per rollout (KBENV_LANE_PREEMPT, KBENV_LANE_PASS_ON; lanes 3 by default). The
  # first run warms the baselines up (stop 47's first run had no early warm-up), so that the runs compared run warm,
  # back to back. Stop 48 measured passing on (14.9 against 13.2/min at checkpoints only, 15.7 against 13.6 giving
  # way during calls); since then a killed executor counts what NVML says it holds (the 1.4-2.1 s worker_wait of
  # every evaluation after a lane's first) and a first warm-up waits for the GPU alone. Then four lanes with it all.
  for run in ${RUNS:-b15cold:1:1 b15:1:1 b15ckpt:checkpoints:1 b15l4:1:1:4}; do
    IFS=: read -r tag mode pass lanes <<< "$run"
    (( $(left) > 150 )) && KBENV_LANE_PREEMPT=$mode KBENV_LANE_PASS_ON=$pass ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 \
      ROLLOUT_LANES=${lanes:-3} ROLLOUT_TAG=$tag ROLLOUT_ARGS="--timing-budget 1.5" bash benchmarks/gpu_run.sh rollout
  done
  # the row cut short under lanes at stops 45-48: a hang at import times out at the compile limit and is judged again
  # alone, so it takes twice the limit (180 s by default)
  (( $(left) > 170 )) && REDTEAM_SHARDS="" REDTEAM_ONLY_LIMIT=160 REDTEAM_ONLY="89:sleep_import" \
    REDTEAM_LIMITS="--lanes 2 --limit compile=60 --limit trial=20 --limit timing=60" bash benchmarks/gpu_run.sh redteam
  # 88 at full size, one lane: stop 48's outlier (a block intercept of 0.77 ms against 0.42-0.50, paid 0 as
  # impossible_speed under three lanes); facts.cpus.by_side says which side had the extra threads
  (( $(left) > 80 )) && TRUSTED_PROBLEMS=kernelbench/level1/88 REPEATS=8 TRUSTED_LIMIT=$(( $(left) - 10 )) \
    TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A70 "Pace" "$f" | head -80; done
  grep -A1 '^==' /tmp/gpuout/trusted.log; grep "^\[" /tmp/gpuout/redteam-only.log
fi
