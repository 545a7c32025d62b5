#!/usr/bin/env bash
# This round's GPU measurements, one call per machine (the device tool's $OUT keeps 8 files).
#   source .whl/prelude.sh && bash instructor/gpu/round.sh cards   # an H200 (or any one GPU)
#   source .whl/prelude.sh && bash instructor/gpu/round.sh notebooks   # then, same machine
#   source .whl/prelude.sh && bash instructor/gpu/round.sh class   # an H100 (x2 for Dask)
#   source .whl/prelude.sh && bash instructor/gpu/round.sh dask   # then, same (2-GPU) machine
# cards: checktimes (#47's tune targets on this card) and the two slider panels not yet
#        recorded (#48), about 4 min on an H200; notebooks: all 13 top to bottom, 5 at a time.
# class: #45's grading measurements (instructor/gpu/grading.sh, under 10 minutes);
# dask: #45's Dask comparison, one bench run: the same class on 2 GPUs, then on 1 (~9 min).
# contention: #45's probe of what a 2-GPU machine's graders share (contention.py), then
#             the Dask comparison at 96 students with the machine sampled (~8 min).
# cpu: #45's CPU by kind of process while one GPU grades 96 lesson-01 notebooks on Dask,
#      then contention.py on this machine (~5 min).
# quick: #45's two headline runs only (25 lesson-01 notebooks, the rehearsal), under 5 min.
# wall: each GPU's grading sandbox reaches that GPU alone (gpu_nodes.py; 2+ GPUs), then
#       quick, then lesson 10 graded (Nsight Compute in the sandbox), under 8 min.
# probe: the rehearsal and the 200-class at --jobs 16, under 9 min.
# counted: #47's counted tune targets with the GPU's own counters: both counts of the
#          solutions, given kernels and attackers (counted_debug.py), checktimes as if on an
#          L4, lessons 10 and 02 graded as if on a T4 / L4 with their attackers, ~4 min.
# gpt2: #49's reports in one run - bench gpt2 matmul attention (~8 min on an H200).
# where: #49's kernel-by-kernel split of PyTorch's GPT-2 forward beside ours (gpt2_where.py),
#        then ncu on layernorm and on the MLP fc matmul fused / plain, ~4 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/round-out}; mkdir -p "$OUT"
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-')
DAY=$(date +%F)
echo "device $DEV, $(nvidia-smi -L | wc -l) GPU(s), $DAY"
checktimes() {
  echo "=== checktimes ($(date +%T))"
  CUDA_VISIBLE_DEVICES=0 timeout 330 python -m course checktimes \
    --out "$OUT/check-times-$DEV-$DAY.md" 2>&1 | tail -n 70
}
case "${1:-}" in
  cards)
    checktimes
    echo "=== sliders ($(date +%T))"
    mkdir -p /tmp/sliders
    timeout 200 python -m course bench sliders --panel 08_flash_attention/N_d \
      --panel 09_histogram/two_phase --out /tmp/sliders 2>&1 | tail -n 20
    cp /tmp/sliders/*.json "$OUT/" 2>/dev/null
    ;;
  notebooks)
    echo "=== notebooks ($(date +%T))"
    timeout 560 python instructor/gpu/notebooks.py /tmp/nb --parallel 5 --timeout 500 2>&1 | tail -n 20
    cp /tmp/nb/notebooks-gpu.md "$OUT/" 2>/dev/null
    tar czf "$OUT/notebooks-executed.tar.gz" -C /tmp/nb executed 2>/dev/null
    ;;
  class)
    OUT="$OUT" GRADING_PART=single timeout 570 bash instructor/gpu/grading.sh
    ;;
  dask)
    OUT="$OUT" GRADING_PART=dask timeout 590 bash instructor/gpu/grading.sh
    ;;
  contention)
    echo "=== transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
    echo "=== contention ($(date +%T))"
    timeout 240 python instructor/gpu/contention.py "$OUT/contention-$DEV-x$(nvidia-smi -L | wc -l)-$DAY.json" 2>&1 | grep -v Warn
    OUT="$OUT" GRADING_PART=dask GRADING_DASK_STUDENTS=${STUDENTS:-96} timeout 330 bash instructor/gpu/grading.sh
    ;;
  cpu)
    echo "=== $(lscpu | grep -E "^CPU\(s\)|Thread|Model name" | tr -s ' ' | paste -sd';'); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
    echo "=== where the CPU goes: 96 lesson-01 notebooks on Dask, 12 workers, one GPU ($(date +%T))"
    python instructor/gpu/cpu_by_process.py "$OUT/cpu-by-process-$DEV-$DAY.json" & C=$!
    python instructor/gpu/sampler.py "$OUT/machine-samples-$DEV-$DAY.csv" & S=$!
    CUDA_VISIBLE_DEVICES=0 timeout 260 python -m course bench grading --label dask-cpu \
      --out "$OUT" --timeout 220 --students "${STUDENTS:-96}" --lessons 01_vector_add --jobs 12 \
      --executor dask --gpus 1 2>&1 | grep -e "graded" -e "ready" -e "^==" | grep -v "6/6"
    grep -h -e "^- 96" -e "honest students" "$OUT"/grading-dask-cpu-*.md | cut -c1-300
    kill $C $S; sleep 2
    python - "$OUT/cpu-by-process-$DEV-$DAY.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("machine", d["machine_cpu_s"], "in", d["seconds"], "s")
for k, v in list(d["by_kind"].items())[:14]:
    print(f"  {k:40s} user {v['user_s']:8.1f}  system {v['system_s']:8.1f}  processes {v['processes']}")
PY
    echo "=== a measurer's warm-up, part by part, in fresh processes ($(date +%T))"
    for a in "" ptx-first "" ptx-first; do
      CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 60 python instructor/gpu/warmup_parts.py $a 2>&1 | tail -n 1
    done
    if [ -z "${NO_CONTENTION:-}" ]; then
      echo "=== contention ($(date +%T))"
      timeout 200 python instructor/gpu/contention.py "$OUT/contention-$DEV-$DAY.json" 2>&1 | grep -v Warn
    fi
    ;;
  quick)
    OUT="$OUT" GRADING_PART=quick timeout 300 bash instructor/gpu/grading.sh
    ;;
  wall)
    echo "=== fs.file-max $(cat /proc/sys/fs/file-max), fs.aio-max-nr $(cat /proc/sys/fs/aio-max-nr)"
    echo "=== a grading sandbox reaches only its maker's GPU ($(date +%T))"
    timeout 200 python instructor/gpu/gpu_nodes.py \
      "$OUT/gpu-nodes-$DEV-x$(nvidia-smi -L | wc -l)-$DAY.md" 2>&1 | grep -v Warn
    if [ -z "${NO_QUICK:-}" ]; then
      OUT="$OUT" GRADING_PART=quick timeout 330 bash instructor/gpu/grading.sh
    else
      CUDA_VISIBLE_DEVICES=0 timeout 150 python -m course bench grading --students 25 --jobs 8 \
        --label wall-rehearsal --out "$OUT" 2>&1 | grep -e "graded " -e "^- "
    fi
    echo "=== 10_profiling graded on this card: Nsight Compute in the sandbox ($(date +%T))"
    CUDA_VISIBLE_DEVICES=0 timeout 150 python -m course bench grading --students 6 \
      --lessons 10_profiling --jobs 6 --label wall-lesson10 --out "$OUT" 2>&1 \
      | grep -e "\] " -e "graded "
    rm -f "$OUT"/*.log
    ;;
  probe)
    OUT="$OUT" GRADING_PART=probe timeout 560 bash instructor/gpu/grading.sh
    ;;
  counted)
    R=/tmp/counted; mkdir -p "$R"
    echo "=== both counts of solution, given kernel and every attacker ($(date +%T))"
    timeout 200 python instructor/gpu/counted_debug.py "$R" 2>&1 | grep -v Warn | cut -c1-330
    cp "$R"/counted-debug.json "$OUT/" 2>/dev/null  # each step's result as soon as it is made
    echo "=== checktimes as if on an L4 ($(date +%T))"
    COURSE_TUNE_CARD="NVIDIA L4" CUDA_VISIBLE_DEVICES=0 timeout 150 python -m course checktimes \
      --only tune_transpose tune_reduction --out "$R/check-times-$DEV-as-nvidia-l4-$DAY.md" \
      2>&1 | grep "^| .tune_"
    cp "$R"/*.md "$OUT/" 2>/dev/null
    for pair in "Tesla T4:10_profiling:as-t4" "NVIDIA L4:02_reduction:as-l4"; do
      IFS=: read -r card lesson label <<< "$pair"
      echo "=== $lesson graded as if on $card, its attackers included ($(date +%T))"
      COURSE_TUNE_CARD="$card" CUDA_VISIBLE_DEVICES=0 timeout 150 python -m course bench \
        grading --students 6 --lessons "$lesson" --jobs 6 --label "$label" --out "$R" \
        2>&1 | grep -e "\] " -e "graded "
      cp "$R"/*.md "$OUT/" 2>/dev/null
    done
    cp "$R"/*.md "$OUT/" 2>/dev/null
    tar czf "$OUT/counted-all.tar.gz" -C "$R" .
    ;;
  where)
    echo "=== gpt2 where ($(date +%T))"
    timeout 240 python instructor/gpu/gpt2_where.py "$OUT" 2>&1 \
      | grep -v -e NumbaPerformanceWarning -e "warn(errors" | cut -c1-240 | tail -n 80
    N="$OUT/gpt2-ncu-$DEV-$DAY.txt"
    echo "# ncu on instructor/gpu/gpt2_where.py --one, $DEV, $DAY" > "$N"
    S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats"
    S="$S --section SchedulerStats --section Occupancy --section LaunchStats"
    echo "=== ncu ($(date +%T))"
    timeout 150 ncu --target-processes all -k regex:layernorm --launch-skip 1 --launch-count 1 \
      $S python instructor/gpu/gpt2_where.py /tmp/w --one 2>&1 | grep -v Warning >> "$N"
    timeout 200 ncu --target-processes all -k regex:matmul_v6 --launch-skip 2 --launch-count 2 \
      $S python instructor/gpu/gpt2_where.py /tmp/w --one 2>&1 | grep -v Warning >> "$N"
    grep -e "Duration" -e "Profiling" -e "Throughput" -e "Stall" -e "Issued Warp" "$N" | cut -c1-160 | head -n 60
    ;;
  gpt2)
    # #49's one report from one run: lessons 11, 04 and 08 (about 8 minutes on an H200 with
    # every compile); nine files, so the reports travel as one archive, the tables beside it
    B=/tmp/bench; mkdir -p "$B"
    echo "=== bench gpt2 matmul attention ($(date +%T))"
    CUDA_VISIBLE_DEVICES=0 timeout 560 python -m course bench gpt2 matmul attention --out "$B" \
      2>&1 | grep -v -e NumbaPerformanceWarning -e "warn(errors" | grep -e "^==" -e "wrote"
    cp "$B"/*.md "$OUT/" 2>/dev/null
    tar czf "$OUT/bench.tar.gz" -C "$B" .
    grep -h -e "^- B=4 T=1024: optimized" -e "^- v6 at 4096" "$OUT"/*.md 2>/dev/null
    ;;
  checktimes) checktimes ;;
  *) echo "usage: round.sh cards|notebooks|class|quick|wall|probe|dask|checktimes|counted|gpt2"
     exit 2 ;;
esac
echo "done ($(date +%T)): $(ls "$OUT")"
