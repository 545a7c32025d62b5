#!/usr/bin/env bash
# Issue #45's GPU measurements, one run: warm vs cold rehearsal, the 200-class, and on a
# machine of 2+ GPUs Dask on 2 GPUs against one.  Run from anywhere on the GPU machine after
# `source .whl/prelude.sh`.  Every run is cut off (bench --timeout, then a hard `timeout`)
# and still writes its report.  Outputs, 3 files in $OUT: grading-report.md,
# grading-runs.json, grading-logs.tar.gz (each run's report, profile and grader log).
# One H100: at most 95 + 65 + 275 s of grading plus start-up, about 7.5 minutes.
# 2 GPUs ("dask"): one bench run grading 160 lesson-01 notebooks (attackers included) on
# Dask on 2 GPUs, then on 1, at most 2 x 250 s; the machine sampled meanwhile.
# A dry run (no GPU: the simulator, tiny classes, every step of the script):
#   GRADING_TINY=1 GRADING_DASK=1 OUT=/tmp/g instructor/gpu/grading.sh
set -uo pipefail
OUT=${OUT:-/tmp/grading-out}; mkdir -p "$OUT"; W=$(mktemp -d)
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ -n "${GRADING_TINY:-}" ]; then  # the dry run's sizes: students and cut-offs
  R=2; C=2; TR=240; TC=240; T2=240; TD=240; TQ=240; TP=240
else
  R=25; C=200; TR=95; TC=65; T2=275; TD=250; TQ=110; TP=300
fi
bench() { # label, bench's cut-off, then bench options
  local label=$1 cut=$2; shift 2
  echo "=== $label: $* ($(date +%T))"
  timeout -k 10 $((cut + 45)) "$PY" -m course bench grading --label "$label" \
    --out "$W/$label" --timeout "$cut" "$@" >"$W/$label.out" 2>&1
  echo "    exit $? ($(date +%T)); last lines:"; tail -n 4 "$W/$label.out" | sed 's/^/    /'
}
# GRADING_PART: "single" (the one-GPU runs), "dask" (the Dask pair), or both (default):
# a device call runs 10 minutes at most, so a 2-GPU machine takes two calls.  "quick": the
# issue's two headline runs only, under 4 minutes (25 lesson-01 notebooks with one forged,
# then the rehearsal), for a session with little GPU time left.  "probe": the rehearsal and
# the 200-class at --jobs 16 (one job per core pair of a 16-core box), under 8 minutes.
PART=${GRADING_PART:-both}
if [ "$PART" = quick ]; then
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  bench "class$R-lesson01" "$TQ" --students "$R" --lessons 01_vector_add --jobs 8
  bench rehearsal-warm "$TQ" --students "$R" --jobs 8
  unset CUDA_VISIBLE_DEVICES
  PART=none
fi
if [ "$PART" = probe ]; then  # the rehearsal, then the 200-class with a job per 2 cores
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  bench rehearsal-warm "$TQ" --students "$R" --jobs 8
  bench "class$C-jobs16" "$TP" --students "$C" --lessons 01_vector_add --no-attackers --jobs 16
  unset CUDA_VISIBLE_DEVICES
  PART=none
fi
if [ "$PART" != dask ] && [ "$PART" != none ]; then
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # one GPU, whatever the machine has
  bench rehearsal-warm "$TR" --students "$R" --jobs 8
  bench rehearsal-cold "$TC" --students "$R" --jobs 8 --cold
  bench "class$C-warm" "$T2" --students "$C" --lessons 01_vector_add --no-attackers --jobs 8
  unset CUDA_VISIBLE_DEVICES
fi
if [ "$PART" != single ] && [ "$PART" != none ] && { [ "$NGPU" -ge 2 ] || [ -n "${GRADING_DASK:-}" ]; } \
  && "$PY" -c "import distributed" 2>/dev/null; then
  # one report: the same class on Dask on 2 GPUs, then on 1 (each GPU on its share of the
  # cores, --jobs workers a GPU); 2 first, so the machine's first-touch memory is its cost
  NW=${GRADING_DASK_JOBS:-$([ -n "${GRADING_TINY:-}" ] && echo 1 || echo 12)}
  DS=${GRADING_DASK_STUDENTS:-$([ -n "${GRADING_TINY:-}" ] && echo 2 || echo 160)}
  "$PY" instructor/gpu/sampler.py "$OUT/dask-machine-samples.csv" & SAMPLER=$!
  echo "=== dask-gpus: $DS students, $NW workers a GPU, on 2 GPUs then 1 ($(date +%T))"
  timeout -k 10 $((2 * TD + 60)) "$PY" -m course bench grading --label dask-gpus \
    --out "$W/dask-gpus" --timeout "$TD" --students "$DS" --lessons 01_vector_add \
    --jobs "$NW" --executor dask --gpus 2,1 >"$W/dask-gpus.out" 2>&1
  echo "    exit $? ($(date +%T)); last lines:"; tail -n 4 "$W/dask-gpus.out" | sed 's/^/    /'
  grep -A5 "^| GPUs" "$W"/dask-gpus/*.md
  kill "$SAMPLER" 2>/dev/null
  cp "$W"/dask-gpus/*.md "$W"/dask-gpus/*.json "$OUT/" 2>/dev/null  # logs: in the archive
else
  echo "=== dask: skipped (GPUs: $NGPU; it needs 2 and Dask distributed)"
fi
cat "$W"/*/*.md >"$OUT/grading-report.md" 2>/dev/null
"$PY" - "$W" "$OUT/grading-runs.json" <<'PY'
import json, sys, pathlib
runs = {}
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/*.json")):
    try:
        runs[p.parent.name] = json.loads(p.read_text()).get("data", {}).get("grading")
    except (OSError, ValueError):
        pass
pathlib.Path(sys.argv[2]).write_text(json.dumps(runs, indent=1))
for k, v in runs.items():
    if v:
        print(f"{k}: {v['graded']}/{v['students']} in {v['seconds']:.1f} s wall, "
              f"{v.get('cpu_s') or 0:.0f} s CPU, {v['per_minute']}/min, honest full "
              f"{v['honest_full_marks']}, attacks 0 {v['attacks_earned_zero']}"
              f"{', CUT OFF' if v.get('interrupted') else ''}")
PY
tar czf "$OUT/grading-logs.tar.gz" -C "$W" . 2>/dev/null
rm -rf "$W"
echo "done: $(ls "$OUT")"
