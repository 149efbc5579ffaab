#!/bin/bash
# The GPU runs behind docs/benchmarks.md, "GPU whole model", in one command:
#   bench/gpu_decode_run.sh BUILD LOGDIR [LAYERS] [RUNS]
# BUILD is a -DEQ_CUDA=ON build folder holding expertquant and
# bench/synth_checkpoint. Makes LAYERS (default 16) layers of the
# Qwen3-30B-A3B shape, packs them as fp4_g32 and as the mix842 allocation
# (expert e of layer l int8_row when (7e + l) mod 20 < 3, int2_g32 when < 8,
# else fp4_g32: 15%, 25%, 60%, as the layer benchmarks' mix842), and runs
# `generate -n 256 --device cuda` RUNS times (default 3) in each setting,
# alternating, so that each comparison is within one call:
#   fp4 / mix               all on
#   fp4 / mix pdl0          EXPERTQUANT_GPU_PDL=0 (plain launches, no
#                           programmatic dependent launch)
#   fp4 / mix once0         EXPERTQUANT_GPU_QUANTIZE_ONCE=0 (every block
#                           quantizes its x, as before 6de75be and 72f69b1)
#   mix lanes0              EXPERTQUANT_GPU_MIXED_LAUNCH=0 (a lane a bit group)
#   mix sets0               EXPERTQUANT_GPU_BODY_SETS=0 (the shared launches
#                           in the kernel holding every body)
#   fp4 graph0              EXPERTQUANT_GPU_GRAPH=0
#   fp4 splits0             EXPERTQUANT_GPU_KEY_SPLITS=0
#   fp4 bf16_0              EXPERTQUANT_GPU_DENSE_BF16=0
#   fp4 off                 all four off
# NSYS=path/to/nsys adds a trace of each pack (-n 160) and of mix sets0, all
# with plain launches (under programmatic dependent launch a kernel's start
# is when it was placed, before the one it waits for ends, so its span would
# say nothing of its work), summed by bench/nsys_busy.py --by-grid, and the
# routed experts' span of a layer (bench/nsys_span.py, route_kernel to
# combine_kernel). Prints one line a run; logs go to LOGDIR. SHAPE="..."
# passes its options to synth_checkpoint for another shape, e.g. the
# 235B-shaped step of docs/benchmarks.md: LAYERS 8 and SHAPE="--experts 32
# --hidden 4096 --inter 1536 --heads 64 --kv-heads 4" (the mix then covers
# those experts).
set -u
build=$1 logs=$2 layers=${3:-16} runs=${4:-3}
shape=${SHAPE:-}
experts=$(echo " $shape" | sed -nE 's/.* --experts ([0-9]+).*/\1/p')
mkdir -p "$logs"
work=${WORK:-/dev/shm/eq-gpu-decode}
rm -rf "$work" && mkdir -p "$work"
eq=$build/expertquant
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git log -1 --format=%H 2>/dev/null; } > "$logs/machine.txt" 2>&1

# shellcheck disable=SC2086  # SHAPE's options, split
"$build/bench/synth_checkpoint" "$work/model" --layers "$layers" $shape > "$logs/synth.log" 2>&1 ||
  { echo "synth_checkpoint failed"; exit 1; }
python3 - "$work/alloc.json" "$layers" "${experts:-128}" <<'PY'
import json, sys
path, layers, experts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def entry(e, l):
    r = (7 * e + l) % 20
    if r < 3: return {"expert": e, "class": "critical", "format": "int8_row"}
    if r < 8: return {"expert": e, "class": "deprioritized", "format": "int2_g32"}
    return {"expert": e, "class": "standard", "format": "fp4_g32"}
json.dump({"schema": "expertquant.allocation", "version": 1,
           "layers": [{"layer": l, "experts": [entry(e, l) for e in range(experts)]} for l in range(layers)]},
          open(path, "w"))
PY
"$eq" pack --model "$work/model" --uniform fp4_g32 --device cuda -o "$work/fp4" > "$logs/pack-fp4.log" 2>&1 || { echo "pack fp4 failed"; exit 1; }
"$eq" pack --model "$work/model" --allocation "$work/alloc.json" --device cuda -o "$work/mix" > "$logs/pack-mix.log" 2>&1 || { echo "pack mix failed"; exit 1; }
rm -rf "$work/model"

gen() {  # gen LABEL PACK [VAR=VALUE ...]
  local label=$1 pack=$2; shift 2
  env "$@" "$eq" generate --packed "$work/$pack" --prompt "The history of the" -n 256 --device cuda \
    > "$logs/gen-$label.log" 2>&1 || echo "$label: generate failed"
  echo "$label: $(grep -a -oE 'decode [0-9.]+ tok/s' "$logs/gen-$label.log")"
}
for run in $(seq "$runs"); do
  gen "fp4-run$run" fp4
  gen "mix-run$run" mix
  gen "fp4-pdl0-run$run" fp4 EXPERTQUANT_GPU_PDL=0
  gen "mix-pdl0-run$run" mix EXPERTQUANT_GPU_PDL=0
  gen "fp4-once0-run$run" fp4 EXPERTQUANT_GPU_QUANTIZE_ONCE=0
  gen "mix-once0-run$run" mix EXPERTQUANT_GPU_QUANTIZE_ONCE=0
  gen "mix-lanes0-run$run" mix EXPERTQUANT_GPU_MIXED_LAUNCH=0
  gen "mix-sets0-run$run" mix EXPERTQUANT_GPU_BODY_SETS=0
  gen "fp4-graph0-run$run" fp4 EXPERTQUANT_GPU_GRAPH=0
  gen "fp4-splits0-run$run" fp4 EXPERTQUANT_GPU_KEY_SPLITS=0
  gen "fp4-bf16_0-run$run" fp4 EXPERTQUANT_GPU_DENSE_BF16=0
  gen "fp4-off-run$run" fp4 EXPERTQUANT_GPU_GRAPH=0 EXPERTQUANT_GPU_KEY_SPLITS=0 EXPERTQUANT_GPU_DENSE_BF16=0 \
    EXPERTQUANT_GPU_PDL=0
done

if [ -n "${NSYS:-}" ]; then
  for setting in fp4 mix mix-sets0; do
    pack=${setting%%-*}
    env EXPERTQUANT_GPU_PDL=0 $([ "$setting" = mix-sets0 ] && echo EXPERTQUANT_GPU_BODY_SETS=0) \
      "$NSYS" profile --trace=cuda --cuda-graph-trace=node -o "$work/prof-$setting" --force-overwrite true \
      "$eq" generate --packed "$work/$pack" --prompt "The history of the" -n 160 --device cuda \
      > "$logs/nsys-$setting.log" 2>&1
    "$NSYS" export --type sqlite -o "$work/prof-$setting.sqlite" "$work/prof-$setting.nsys-rep" \
      >> "$logs/nsys-$setting.log" 2>&1
    python3 "$(dirname "$0")/nsys_busy.py" "$work/prof-$setting.sqlite" --by-grid --top 16 | tee "$logs/busy-$setting.txt"
    python3 "$(dirname "$0")/nsys_span.py" "$work/prof-$setting.sqlite" --after route_kernel --before combine_kernel |
      tee "$logs/span-$setting.txt"
  done
fi
