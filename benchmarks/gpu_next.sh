#!/usr/bin/env bash
# The device calls still to make for issues 11 and 13 (written at stop 46, whose every start was refused), chosen by
# the card that comes (the device tool may give an H100 for an H200):
#   T=SECONDS bash benchmarks/gpu_next.sh   (T: the call's limit, as GPU_RUN_UNTIL is set from it)
# First, about 30 s: whether a dying context disturbs a kernel timed beside it (dying_context_spike.py).
# On an H200: issue 11's figures (23, 88, 40, dlrm/2 at full size, 5 evaluations each; 23 and 88 only in a short
# call; then test_gpu.py with what is left). On an H100: issue 13's lanes at --timing-budget 1.5, three lanes with
# giving way during calls (stop 46) and, back to back, at checkpoints only (stop 45's), then four lanes; each
# run's facts.lanes.split_s says where giving way's time goes. (The build ahead as three lanes plan,
# PREFETCH_LANES=3 bash benchmarks/gpu_run.sh prefetch, about 200 s, needs a call of its own before these.)
set -u
export GPU_RUN_UNTIL=$(( $(date +%s) + ${T:-600} - 20 ))
left() { echo $(( GPU_RUN_UNTIL - $(date +%s) )); }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
mkdir -p /tmp/gpuout  # (the spike's files are packed with the first stage's results)
timeout 75 python3 benchmarks/dying_context_spike.py --children 2 --gb 8 --out /tmp/gpuout/dying_spike.json \
  > /tmp/gpuout/dying_spike.log 2>&1
cat /tmp/gpuout/dying_spike.log
if [[ $card == *H200* ]]; then
  P=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2
  (( $(left) < 450 )) && P=kernelbench/level1/23,kernelbench/level1/88
  TRUSTED_PROBLEMS=$P REPEATS=5 TRUSTED_LIMIT=330 TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  (( $(left) > 90 )) && TESTS_LIMIT=400 bash benchmarks/gpu_run.sh tests
  tail -n 30 /tmp/gpuout/trusted.log; tail -n 15 /tmp/gpuout/tests.log
else
  for run in "3 b15" "3 b15ckpt" "4 b15"; do
    set -- $run
    mode=1; [[ $2 == *ckpt ]] && mode=checkpoints
    (( $(left) > 150 )) && KBENV_LANE_PREEMPT=$mode ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 ROLLOUT_LANES=$1 \
      ROLLOUT_TAG=$2 ROLLOUT_ARGS="--timing-budget 1.5" bash benchmarks/gpu_run.sh rollout
  done
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A70 "Pace" "$f" | head -80; done
fi
