#!/usr/bin/env bash
# Stop 46's device calls: what runs depends on the card that came (the device tool may give an H100 for an H200).
#   T=SECONDS bash benchmarks/session46.sh   (T: the call's limit, as GPU_RUN_UNTIL is set from it)
# On an H200: issue 11's figures (23, 88, 40, dlrm/2 at full size, 5 evaluations each; then test_gpu.py with what is
# left). On an H100: issue 13's lanes at --timing-budget 1.5, three lanes then four, with facts.lanes.split_s saying where giving way's time goes; the build ahead only with time for it.
set -u
export GPU_RUN_UNTIL=$(( $(date +%s) + ${T:-600} - 20 ))
left() { echo $(( GPU_RUN_UNTIL - $(date +%s) )); }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
# whether a dying context disturbs a kernel timed beside it (about 30 s; packed with the first stage's results)
mkdir -p /tmp/gpuout
timeout 75 python3 benchmarks/dying_context_spike.py --children 2 --gb 8 --out /tmp/gpuout/dying_spike.json \
  > /tmp/gpuout/dying_spike.log 2>&1
cat /tmp/gpuout/dying_spike.log
if [[ $card == *H200* ]]; then
  P=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2
  (( $(left) < 450 )) && P=kernelbench/level1/23,kernelbench/level1/88  # a short call: 23 and one of the set
  TRUSTED_PROBLEMS=$P REPEATS=5 TRUSTED_LIMIT=330 TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  (( $(left) > 90 )) && TESTS_LIMIT=400 bash benchmarks/gpu_run.sh tests
  tail -n 30 /tmp/gpuout/trusted.log; tail -n 15 /tmp/gpuout/tests.log
else
  (( $(left) > 560 )) && PREFETCH_LANES=3 PREFETCH_LIMIT=200 bash benchmarks/gpu_run.sh prefetch
  for lanes in 3 4; do
    (( $(left) > 150 )) && ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 ROLLOUT_LANES=$lanes ROLLOUT_TAG=b15 \
      ROLLOUT_ARGS="--timing-budget 1.5" bash benchmarks/gpu_run.sh rollout
  done
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A60 "Pace" "$f" | head -70; done
fi
