#!/usr/bin/env bash
# The device calls still to make for issues 11 and 13 (rewritten at stop 49), chosen by the card that comes (the
# device tool may give an H100 for an H200) and by the call (CALL=1, then CALL=2 on the same warm machine):
#   T=SECONDS CALL=1 bash benchmarks/gpu_next.sh   (T: the call's limit, as GPU_RUN_UNTIL is set from it)
# H200, call 1: issue 11's repeatability (23, 88, 40, dlrm/2 at full size, 5 evaluations each), then issue 13's
# 16-problem known-good rollout at three lanes, --timing-budget 1.5 (its first run warms the baselines). H200, call
# 2: three lanes warm (the figure), four lanes, test_gpu.py, then the known-bad row 89:sleep_import under lanes.
# SET=compare (stop 51): the repeatability set with one lane, then GRPO's shape under three lanes, on one host, with
# benchmarks/lane_accuracy.py comparing them (and, since b75025c, what the candidate's own clamped intercept would pay:
# the next call to make, to choose the candidate's intercept rule).
# SET=redteam52 (stop 52, any card, about 4 minutes): the rows stop 52 added or changed, at the largest size, with
# their honest twins, so that run_suite holds the passing ones to them (19:reply_bomb and 19:oversized_source rejected,
# 23:inflate_own_intercept and 19:look_ahead within noise of their twins); T=300 is enough. SET=compare is its own call.
# (Ran at stop 53 on an H100, with test_gpu.py after it: docs/results/h100-stop53.txt.)
# SET=ab53 (stop 53, any card, T=560): the block intercept's parts on 23 (the eager process and the honest
# candidate's, intercept_spike.py), then the repeatability set with the block intercept estimated every round (the
# default since stop 53), then every fourth (the rule before), on one host: whether it cuts the CV (88 3.8%, 40 2.6%,
# dlrm/2 6.8% on the H200 at stop 51). The first call to make next, with test_gpu.py after it (92f6c93 and dfd7dff
# changed the cuda timing path): `export GPU_RUN_UNTIL=$(( $(date +%s) + 580 )); T=560 SET=ab53 bash
# benchmarks/gpu_next.sh > $OUT/next.log 2>&1; TESTS_LIMIT=300 bash benchmarks/gpu_run.sh tests >> $OUT/next.log 2>&1;
# tar -czf $OUT/results.tgz -C /tmp gpuout` needs about 800 s: on one call, AB_PROBLEMS=kernelbench/level1/88,dlrm/2.
# SET=rule54 (stop 54, any card; on an H200 issue 11's figure; T=580): the repeatability set at full size under the
# intercept rule since stop 54 (the compared baseline's, capped by the candidate's own), with lane_accuracy.py
# printing the least rule's speedups from the same records beside the paid ones (a paired A/B), then
# 23:inflate_own_intercept and 23:spin_and_shape with their honest twin, then test_gpu.py with the time left. THE FIRST CALL TO MAKE NEXT:
# `T=580 SET=rule54 bash benchmarks/gpu_next.sh > $OUT/next.log 2>&1; cp -r /tmp/gpuout $OUT/` (ab53 after it).
# SET=fork54 (stop 54, any card, T=580; the call after rule54): the fork server on cuda (sandbox/zygote.py, the cpu
# default since stop 54): an executor's start spawned and forked (spawn_bench.py), test_gpu.py with KBENV_FORK_SERVER=1, then the 16-problem rollout at three lanes,
# --timing-budget 1.5, with it and without it, on one host (issue 13: worker_wait, evaluations/min, GPU busy).
# SET=final: on an H200 issue 11's set, then the lanes cold and warm; elsewhere as SET=lanes.
# SET=lanes (any card): the 16-problem rollout cold, warm, GRPO-shaped (4 problems x 4), warm again.
# SET=trusted (any card): the repeatability set, 89:sleep_import, test_gpu.py.
# H100 (any call): the lanes runs (RUNS), 89:sleep_import, 88 at full size eight times (stop 48's intercept outlier,
# now with per-side intercepts).
set -u
export GPU_RUN_UNTIL=$(( $(date +%s) + ${T:-600} - 20 ))
left() { echo $(( GPU_RUN_UNTIL - $(date +%s) )); }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card, call ${CALL:-1}"
# RUNS: tag:preempt:pass_on[:lanes] per rollout (KBENV_LANE_PREEMPT, KBENV_LANE_PASS_ON; lanes 3 by default)
lanes_runs() {
  for run in $1; do
    IFS=: read -r tag mode pass lanes <<< "$run"
    (( $(left) > 150 )) && KBENV_LANE_PREEMPT=$mode KBENV_LANE_PASS_ON=$pass ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=170 \
      ROLLOUT_LANES=${lanes:-3} ROLLOUT_TAG=$tag ROLLOUT_ARGS="--timing-budget 1.5" bash benchmarks/gpu_run.sh rollout
  done
}
sleep_import() {  # a hang at import times out at the compile limit and is judged again alone: twice the limit
  (( $(left) > 170 )) && REDTEAM_SHARDS="" REDTEAM_ONLY_LIMIT=160 REDTEAM_ONLY="89:sleep_import" \
    REDTEAM_LIMITS="--lanes 2 --limit compile=60 --limit trial=20 --limit timing=60" bash benchmarks/gpu_run.sh redteam
}
show() {
  for f in /tmp/gpuout/rollout-good-*.log; do echo "== $f"; grep -A80 "Pace" "$f" | grep -v "^\s*$" | head -90; done
  [ -f /tmp/gpuout/trusted.log ] && grep -A1 '^==' /tmp/gpuout/trusted.log
  [ -f /tmp/gpuout/redteam-only.log ] && grep "^\[" /tmp/gpuout/redteam-only.log
  [ -f /tmp/gpuout/tests.log ] && tail -n 15 /tmp/gpuout/tests.log
}
trusted_set() {  # issue 11's repeatability: four problems at full size, five evaluations each
  TRUSTED_PROBLEMS=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2 REPEATS=5 \
    TRUSTED_LIMIT=$(( $(left) - ${1:-250} )) TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
}
group_run() {  # GRPO's shape: a few problems, several completions each (baseline sets kept across a problem's)
  (( $(left) > 100 )) && ROLLOUT_GPUS=1 ROLLOUT_LIMIT_1=$(( $(left) - 20 > 150 ? 150 : $(left) - 20 )) ROLLOUT_LANES=3 ROLLOUT_TAG=$1 \
    ROLLOUT_PROBLEMS=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2 \
    ROLLOUT_ARGS="--timing-budget 1.5 --episodes 4" bash benchmarks/gpu_run.sh rollout
}
if [[ ${SET:-} == redteam52 ]]; then
  bash benchmarks/gpu_run.sh intercept  # stop 53: the block intercept taken apart (about 40 s)
  cat /tmp/gpuout/intercept.log
  REDTEAM_SHARDS="" REDTEAM_ONLY_LIMIT=260 REDTEAM_LIMITS="--limit compile=60 --limit trial=20 --limit timing=60" \
    REDTEAM_ONLY="19:reply_bomb 19:oversized_source 23:inflate_own_intercept 19:look_ahead level1/19:correct level1/23:correct" \
    bash benchmarks/gpu_run.sh redteam
  grep -v "^\s*$" /tmp/gpuout/redteam-only.log | tail -n 12
  tar -czf "${OUT:-$PWD/gpu-out}/results.tgz" -C /tmp gpuout
elif [[ ${SET:-} == fork54 ]]; then  # stop 54 (about 560 s): forked cuda executors, their tests and their pace
  bash benchmarks/gpu_run.sh spawn; cat /tmp/gpuout/spawn.log  # an executor's start, spawned and forked
  KBENV_FORK_SERVER=1 TESTS_LIMIT=250 bash benchmarks/gpu_run.sh tests
  mv /tmp/gpuout/tests.log /tmp/gpuout/tests-fork.log; tail -n 15 /tmp/gpuout/tests-fork.log
  export KBENV_FORK_SERVER=1; lanes_runs "fork54:1:1"
  export KBENV_FORK_SERVER=0; lanes_runs "spawn54:1:1"
  tar -czf "${OUT:-$PWD/gpu-out}/results.tgz" -C /tmp gpuout
elif [[ ${SET:-} == rule54 ]]; then  # stop 54 (about 560 s): the rule's repeatability, its known-bad row, the GPU tests
  TRUSTED_PROBLEMS=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2 REPEATS=5 \
    TRUSTED_LIMIT=$(( $(left) - 300 )) TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  python3 "$PWD/benchmarks/lane_accuracy.py" --trusted /tmp/gpuout/trusted.json > /tmp/gpuout/rule54.txt 2>&1
  cat /tmp/gpuout/rule54.txt
  (( $(left) > 200 )) && REDTEAM_SHARDS="" REDTEAM_ONLY_LIMIT=100 \
    REDTEAM_LIMITS="--limit compile=60 --limit trial=20 --limit timing=60" \
    REDTEAM_ONLY="23:inflate_own_intercept 23:spin_and_shape level1/23:correct" bash benchmarks/gpu_run.sh redteam
  (( $(left) > 120 )) && TESTS_LIMIT=$(( $(left) - 15 )) bash benchmarks/gpu_run.sh tests
  tar -czf "${OUT:-$PWD/gpu-out}/results.tgz" -C /tmp gpuout
elif [[ ${SET:-} == ab53 ]]; then  # stop 53, any card (about 450 s): the repeatability set with the intercept
  # estimated every round (the default since stop 53), then every fourth (the rule before), on one host
  P=${AB_PROBLEMS:-kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2}
  # first, the intercept's parts on 23's eager process and its honest candidate (about 60 s): whether the candidate's
  # larger own intercept (h100-stop53.txt: 1.8 ms against eager's 1.1) is its path or its kernel
  INTERCEPT_PROBLEM=kernelbench/level1/23 INTERCEPT_LIMIT=100 bash benchmarks/gpu_run.sh intercept
  cat /tmp/gpuout/intercept.log
  TRUSTED_PROBLEMS=$P REPEATS=5 TRUSTED_LIMIT=$(( ($(left) - 40) / 2 )) TRUSTED_TAG=every1 TRUSTED_ARGS="--size largest" \
    bash benchmarks/gpu_run.sh trusted
  TRUSTED_PROBLEMS=$P REPEATS=5 TRUSTED_LIMIT=$(( $(left) - 30 )) TRUSTED_TAG=every4 \
    TRUSTED_ARGS="--size largest --calibrate-every 4" bash benchmarks/gpu_run.sh trusted
  for t in every1 every4; do
    echo "## $t"; grep -A1 '^==' /tmp/gpuout/trusted-$t.log
    python3 "$PWD/benchmarks/lane_accuracy.py" --trusted /tmp/gpuout/trusted-$t.json | tail -n 5
  done > /tmp/gpuout/ab53.txt 2>&1
  cat /tmp/gpuout/ab53.txt; tar -czf "${OUT:-$PWD/gpu-out}/results.tgz" -C /tmp gpuout
elif [[ ${SET:-} == compare ]]; then  # stop 51: one lane against three on one host, the cycled calibration block
  # (timing.calibration_calls): the repeatability set alone (any card; on an H200 issue 11's figure), then GRPO's shape
  # under three lanes, whose first evaluations find this host's caches warm from the first
  trusted_set 190
  group_run grp4x4
  python3 "$PWD/benchmarks/lane_accuracy.py" --trusted /tmp/gpuout/trusted.json \
    --records /tmp/gpuout/records-good-1gpu-lanes3-grp4x4.jsonl > /tmp/gpuout/lane_accuracy.log 2>&1
  cat /tmp/gpuout/lane_accuracy.log; tar -czf "${OUT:-$PWD/gpu-out}/results.tgz" -C /tmp gpuout
elif [[ ${SET:-} == final && $card == *H200* ]]; then  # an H200 for the last call: issue 11's set, then the lanes
  TRUSTED_PROBLEMS=kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2 REPEATS=5 \
    TRUSTED_LIMIT=$(( $(left) > 450 ? 200 : $(left) - 40 )) TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
  lanes_runs "h200cold:1:1 h200:1:1"
elif [[ ${SET:-} == final ]] && (( $(left) < 300 )); then  # little time on an H100: the GRPO-shaped run alone
  group_run grp4x4
elif [[ ${SET:-} == lanes || ${SET:-} == final ]]; then  # any card: the 16-problem rollout cold, warm, 4 problems x 4, warm again
  lanes_runs "b15cold:1:1 b15:1:1"
  group_run grp4x4
  lanes_runs "b15b:1:1"
elif [[ ${SET:-} == trusted ]]; then  # any card: the repeatability set, 89:sleep_import, then test_gpu.py
  trusted_set 330
  sleep_import
  (( $(left) > 120 )) && TESTS_LIMIT=$(( $(left) - 30 )) bash benchmarks/gpu_run.sh tests
elif [[ $card == *H200* ]]; then
  if [[ ${CALL:-1} == 1 ]]; then
    trusted_set 250
    lanes_runs "${RUNS:-h200cold:1:1}"
  else
    lanes_runs "${RUNS:-h200:1:1 h200l4:1:1:4}"
    (( $(left) > 120 )) && TESTS_LIMIT=$(( $(left) - 200 > 300 ? 300 : $(left) - 200 )) bash benchmarks/gpu_run.sh tests
    sleep_import
  fi
else
  lanes_runs "${RUNS:-b15cold:1:1 b15:1:1 b15l4:1:1:4}"
  sleep_import
  (( $(left) > 80 )) && TRUSTED_PROBLEMS=kernelbench/level1/88 REPEATS=8 TRUSTED_LIMIT=$(( $(left) - 10 )) \
    TRUSTED_ARGS="--size largest" bash benchmarks/gpu_run.sh trusted
fi
show
