#!/usr/bin/env bash
# Issue #45's GPU measurements, one run: cold vs warm rehearsal, the 200-class, Dask on 2 GPUs.
# Run from the repo root on the GPU machine after `source .whl/prelude.sh`; outputs in $OUT
# (grading-report.md, grading-runs.json, grading-logs.tar.gz). About 8 min on one H100 when
# the warm path meets its targets (the cold run is cut off at 150 s; 200-class at 330 s).
set -uo pipefail
OUT=${OUT:-/tmp/grading-out}; mkdir -p "$OUT"; W=$(mktemp -d); cd "$(dirname "$0")/../.."
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
bench() { # label, then bench options
  local label=$1; shift
  echo "=== $label: $* ($(date +%T))"
  python -m course bench grading --label "$label" --out "$W/$label" "$@" 2>&1 | tail -n 40
}
bench rehearsal-warm --students 25 --jobs 8 --timeout 240
bench rehearsal-cold --students 25 --jobs 8 --cold --timeout 150
bench class200-warm --students 200 --lessons 01_vector_add --no-attackers --jobs 8 --timeout 330
if [ "$NGPU" -ge 2 ] && python -c "import distributed" 2>/dev/null; then
  dask scheduler --port 8786 --no-dashboard >"$W/sched.log" 2>&1 & S=$!
  sleep 5
  for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g dask worker tcp://127.0.0.1:8786 --nworkers 8 --nthreads 1 \
      --no-dashboard >"$W/worker$g.log" 2>&1 & eval "D$g=\$!"
  done
  sleep 20
  bench dask-2gpu --students 100 --lessons 01_vector_add --no-attackers --jobs 16 \
    --executor dask --scheduler tcp://127.0.0.1:8786 --timeout 200
  bench dask-1gpu-ref --students 100 --lessons 01_vector_add --no-attackers --jobs 8 --timeout 200
  kill $D0 $D1 $S 2>/dev/null; wait 2>/dev/null
else
  echo "=== dask: skipped (GPUs: $NGPU, distributed importable: no/yes?)"
fi
cat "$W"/*/*.md > "$OUT/grading-report.md"
python - "$W" "$OUT/grading-runs.json" <<'PY'
import json, sys, pathlib
runs = {p.parent.name: json.loads(p.read_text()).get("data", {}).get("grading") for p in pathlib.Path(sys.argv[1]).glob("*/*.json")}
pathlib.Path(sys.argv[2]).write_text(json.dumps(runs, indent=1))
for k, v in sorted(runs.items()):
    if v: print(f"{k}: {v['graded']}/{v['students']} in {v['seconds']:.1f} s, {v['per_minute']}/min, honest full {v['honest_full_marks']}, attacks 0 {v['attacks_earned_zero']}")
PY
tar czf "$OUT/grading-logs.tar.gz" -C "$W" . 2>/dev/null
echo "done: $(ls "$OUT")"
