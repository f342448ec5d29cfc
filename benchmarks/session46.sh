#!/usr/bin/env bash
# Stop 46's device calls: what runs depends on the card that came (the device tool may give an H100 for an H200).
#   bash benchmarks/session46.sh first|second   (T: the call's limit in seconds, as GPU_RUN_UNTIL is set from it)
# On an H200: issue 11's figures first (23, 88, 40, dlrm/2 at full size, 5 evaluations each; all of test_gpu.py).
# On an H100: issue 13's lanes (the build ahead at --size largest, then three and four lanes at --timing-budget 1.5,
# with facts.lanes.split_s saying where giving way's time goes).
set -u
export GPU_RUN_UNTIL=$(( $(date +%s) + ${T:-600} - 20 ))
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
issue11() {
  REPEATS=5 TRUSTED_LIMIT=320 TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  TESTS_LIMIT=400 bash benchmarks/gpu_run.sh tests
  tail -n 30 /tmp/gpuout/trusted.log; tail -n 15 /tmp/gpuout/tests.log
}
issue13() {
  PREFETCH_LANES=3 PREFETCH_LIMIT=200 bash benchmarks/gpu_run.sh prefetch
  ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 ROLLOUT_LANES=3 ROLLOUT_TAG=b15 ROLLOUT_ARGS="--timing-budget 1.5" \
    bash benchmarks/gpu_run.sh rollout
  (( GPU_RUN_UNTIL - $(date +%s) > 170 )) && ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 ROLLOUT_LANES=4 ROLLOUT_TAG=b15 ROLLOUT_ARGS="--timing-budget 1.5" \
    bash benchmarks/gpu_run.sh rollout
  tail -n 4 /tmp/gpuout/prefetch.log
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A60 "Pace" "$f" | head -70; done
}
case "$card:${1:-first}" in
  *H200*:first|*H100*:second) issue11 ;;
  *) issue13 ;;
esac
