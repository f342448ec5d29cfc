#!/usr/bin/env bash
# The device calls still to make for issues 11 and 13 (rewritten at stop 47), chosen by the card that comes (the
# device tool may give an H100 for an H200):
#   T=SECONDS bash benchmarks/gpu_next.sh   (T: the call's limit, as GPU_RUN_UNTIL is set from it)
# On an H200: issue 11's figures (23, 88, 40, dlrm/2 at full size, 5 evaluations each; 23 and 88 only in a short
# call; then test_gpu.py with what is left). On an H100: issue 13's lanes at --timing-budget 1.5, a first run to warm
# the baselines, then three lanes giving way during calls and, back to back, at checkpoints only, then 23 at medium
# five times (the interval rule's minimum, stop 47).
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
  # RUNS: tag:preempt:pass_on per rollout (KBENV_LANE_PREEMPT, KBENV_LANE_PASS_ON). The first run warms the
  # baselines up (stop 47's first run had no early warm-up: 26 s waiting for them), so that the runs compared run
  # warm, back to back (a prefetch took 236 s there, longer than a run). Stop 48: a timing phase passes the GPU
  # straight to a lane waiting to time (Lanes.timing), compared with and without it at checkpoints only, the mode
  # of stop 47's best pace (14.7/min), then giving way during calls with it.
  for run in ${RUNS:-b15cold:checkpoints:1 b15ckpt:checkpoints:1 b15ckptnp:checkpoints:0 b15:1:1}; do
    IFS=: read -r tag mode pass <<< "$run"
    (( $(left) > 150 )) && KBENV_LANE_PREEMPT=$mode KBENV_LANE_PASS_ON=$pass ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 \
      ROLLOUT_LANES=${LANES:-3} ROLLOUT_TAG=$tag ROLLOUT_ARGS="--timing-budget 1.5" bash benchmarks/gpu_run.sh rollout
  done
  (( $(left) > 80 )) && TRUSTED_PROBLEMS=kernelbench/level1/23 REPEATS=5 TRUSTED_LIMIT=$(( $(left) - 10 )) \
    TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A70 "Pace" "$f" | head -80; done
  grep -A1 '^==' /tmp/gpuout/trusted.log
fi
