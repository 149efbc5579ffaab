#!/bin/bash
# eval --device cuda against --device cpu on int8_row packs of every model given, with the GPU's precision
# switches (docs/cli.md) one at a time, and a table of bits per byte relative to the CPU's
# (docs/benchmarks.md, "GPU whole model"):
#   bench/cuda_quality_check.sh EXPERTQUANT WORKDIR MODEL... [> table]
# Modes: cpu; cuda; cuda-split (EXPERTQUANT_GPU_SPLIT_X=1); cuda-nogemv (EXPERTQUANT_GPU_GEMV_MAX_ROWS=0);
# cuda-both; cuda-products (EXPERTQUANT_GPU_LAYERS=0); MODES="cpu cuda" runs those only. CPU_ENV (e.g.
# EXPERTQUANT_BATCH_INT8=0) goes to the cpu mode. Each mode's report is WORKDIR/NAME-MODE.json.
set -u
eq=$1 w=$2
shift 2
mkdir -p "$w"
for m in "$@"; do
  n=$(basename "$m")
  "$eq" pack --model "$m" --uniform int8_row --force -o "$w/$n" > /dev/null 2>&1 || { echo "pack of $n failed"; continue; }
  for mode in ${MODES:-cpu cuda cuda-split cuda-nogemv cuda-both cuda-products}; do
    dev=cuda env=""
    case $mode in
      cpu) dev=cpu env="${CPU_ENV:-}" ;;
      cuda-split) env="EXPERTQUANT_GPU_SPLIT_X=1" ;;
      cuda-nogemv) env="EXPERTQUANT_GPU_GEMV_MAX_ROWS=0" ;;
      cuda-both) env="EXPERTQUANT_GPU_SPLIT_X=1 EXPERTQUANT_GPU_GEMV_MAX_ROWS=0" ;;
      cuda-products) env="EXPERTQUANT_GPU_LAYERS=0" ;;
    esac
    env $env "$eq" eval --packed "$w/$n" --model "$m" --text data/corpus/eval_prose.txt.zst --max-tokens 4096 \
      --no-collapse --no-latency --device $dev --json-out "$w/$n-$mode.json" > "$w/$n-$mode.log" 2>&1 ||
      { echo "eval of $n ($mode) failed: $(tail -1 "$w/$n-$mode.log")"; }
  done
done
python3 - "$w" <<'PY'
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    base = os.path.basename(f)[:-5]
    i = base.rindex("-cpu") if base.endswith("-cpu") else base.index("-cuda")
    o = json.load(open(f))["quality"]["overall"]
    rows.setdefault(base[:i], {})[base[i + 1:]] = (o["bits_packed"], o["kl_mean"], o["top1_agreement"])
for n, r in rows.items():
    cpu = r.get("cpu", (None,))[0]
    for mode, (bpb, kl, top1) in sorted(r.items()):
        rel = (bpb - cpu) / cpu if cpu else float("nan")
        print(f"{n:20s} {mode:14s} bpb {bpb:.6f} rel-to-cpu {rel:+.2e} kl {kl:.3e} top1 {top1:.4f}")
PY
