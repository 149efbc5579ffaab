#!/bin/bash
# Full-size runs (docs/benchmarks.md, "Full-size runs"): profile, pack and
# eval of a random-weight checkpoint at Qwen3-30B-A3B's shapes
# (bench/synth_checkpoint), each phase under /usr/bin/time -v with the page
# cache dropped before it (when run as root), then a table per phase: wall
# time, CPU time, peak RSS (VmHWM) and bytes read from storage against the
# checkpoint's size, and the disk's sequential read bandwidth (dd of three
# shards, cache dropped, median).
#
# usage: bench/full_size_run.sh WORKDIR
# Environment (defaults in brackets):
#   EQ          the binary [build/expertquant]
#   SYNTH       the checkpoint writer [build/bench/synth_checkpoint]
#   LAYERS      synth_checkpoint --layers [auto]; an existing WORKDIR/model is kept
#   PHASES      which phases, in order [bandwidth profile pack eval rates]; rates
#               measures the per-expert CPU costs bench/full_size_projection.py
#               scales: the default policy's sensitivity on a 16-expert layer
#               (2 trellis calibration experts), pack --uniform fp4_g32 and
#               int8_row of it, and trellis2 of a 2-expert layer (same shapes)
#   CALIB       calibration text [../shared/corpus/calib_mixed.txt]
#   EVAL_TEXT   evaluation text [../shared/corpus/eval_python.txt]
#   PROFILE_ARGS  [--max-tokens 16384]
#   PACK_ARGS     [--profile WORKDIR/profile.json]
#   EVAL_ARGS     [--max-tokens 4096]
# Each phase's stderr and time -v output are kept in WORKDIR/PHASE.log.
set -euo pipefail
W=${1:?usage: bench/full_size_run.sh WORKDIR}
EQ=${EQ:-build/expertquant}
SYNTH=${SYNTH:-build/bench/synth_checkpoint}
LAYERS=${LAYERS:-auto}
PHASES=${PHASES:-bandwidth profile pack eval rates}
CALIB=${CALIB:-../shared/corpus/calib_mixed.txt}
EVAL_TEXT=${EVAL_TEXT:-../shared/corpus/eval_python.txt}
PROFILE_ARGS=${PROFILE_ARGS:---max-tokens 16384}
PACK_ARGS=${PACK_ARGS:---profile $W/profile.json}
EVAL_ARGS=${EVAL_ARGS:---max-tokens 4096}
[ -x /usr/bin/time ] || { echo "full_size_run: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$W"
[ -f "$W/model/config.json" ] || "$SYNTH" "$W/model" --layers "$LAYERS"
ckpt_bytes=$(stat -L -c %s "$W"/model/*.safetensors | awk '{ s += $1 } END { print s }')

drop_caches() {
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then echo 1 > /proc/sys/vm/drop_caches; else echo "(not root: page cache kept)" >&2; fi
}

# Runs one phase under time -v; appends "phase wall cpu hwm_kib read_bytes" to $W/phases.txt.
run_phase() {
  local phase=$1; shift
  drop_caches
  /usr/bin/time -v "$@" > "$W/$phase.out" 2> "$W/$phase.log"
  local log=$W/$phase.log
  local wall cpu hwm blocks
  wall=$(grep "Elapsed (wall clock)" "$log" | awk -F': ' '{print $2}' |
         awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$log")
  hwm=$(grep "Maximum resident set size" "$log" | awk -F': ' '{print $2}')
  blocks=$(grep "File system inputs" "$log" | awk -F': ' '{print $2}')
  [ -f "$W/phases.txt" ] && sed -i "/^$phase /d" "$W/phases.txt"
  echo "$phase $wall $cpu $hwm $((blocks * 512))" >> "$W/phases.txt"
}

bandwidth() {
  local rates=()
  for shard in $(ls "$W"/model/model-*.safetensors | head -3); do
    drop_caches
    rates+=("$(dd if="$shard" of=/dev/null bs=64M 2>&1 | awk '/copied/ { print $(NF-1) * ($NF == "GB/s" ? 1000 : 1) }')")
  done
  printf '%s\n' "${rates[@]}" | sort -g | sed -n 2p > "$W/bandwidth_mbs.txt"
}

for phase in $PHASES; do
  case $phase in
    bandwidth) bandwidth ;;
    profile) rm -f "$W/profile.json"
             run_phase profile "$EQ" profile --model "$W/model" --calib "$CALIB" -o "$W/profile.json" --force $PROFILE_ARGS ;;
    pack) rm -rf "$W/pack"
          run_phase pack "$EQ" pack --model "$W/model" -o "$W/pack" $PACK_ARGS ;;
    eval) run_phase eval "$EQ" eval --packed "$W/pack" --model "$W/model" --text "$EVAL_TEXT" \
                    --json-out "$W/eval.json" $EVAL_ARGS ;;
    rates) R=$W/rates
           mkdir -p "$R"
           [ -f "$R/l1e16/config.json" ] || "$SYNTH" "$R/l1e16" --layers 1 --experts 16
           [ -f "$R/l1e2/config.json" ] || "$SYNTH" "$R/l1e2" --layers 1 --experts 2 --top-k 2
           sed 's/"proxy_calibration_experts": 12/"proxy_calibration_experts": 2/' configs/default.json > "$R/policy-cal2.json"
           grep -q '"proxy_calibration_experts": 2' "$R/policy-cal2.json" || { echo "full_size_run: policy edit failed" >&2; exit 2; }
           run_phase rates-sensitivity "$EQ" profile --model "$R/l1e16" --calib "$CALIB" --max-tokens 16384 \
                     --policy "$R/policy-cal2.json" -o "$R/sensitivity.json" --force
           for f in fp4_g32 int8_row; do
             rm -rf "$R/pack-$f"
             run_phase "rates-pack-$f" "$EQ" pack --model "$R/l1e16" --uniform $f -o "$R/pack-$f"
           done
           rm -rf "$R/pack-trellis2"
           run_phase rates-pack-trellis2 "$EQ" pack --model "$R/l1e2" --uniform trellis2 -o "$R/pack-trellis2" ;;
    *) echo "full_size_run: unknown phase $phase" >&2; exit 2 ;;
  esac
done

echo "checkpoint: $W/model, $(awk -v b="$ckpt_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }'), $(nproc) cores"
[ -f "$W/bandwidth_mbs.txt" ] && echo "sequential read (dd, median of 3 shards): $(cat "$W/bandwidth_mbs.txt") MB/s"
echo "| phase | wall s | CPU s | CPU / wall | peak RSS GiB | read GB | read / checkpoint |"
echo "|---|---|---|---|---|---|---|"
[ -f "$W/phases.txt" ] && awk -v ck="$ckpt_bytes" '$1 !~ /^rates/ {
  printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.3f |\n", $1, $2, $3, $3 / $2, $4 / 1048576, $5 / 1e9, $5 / ck
}' "$W/phases.txt"
if grep -q "^rates" "$W/phases.txt" 2>/dev/null; then
  echo
  echo "| rates run | wall s | CPU s | peak RSS GiB |"
  echo "|---|---|---|---|"
  awk '$1 ~ /^rates/ { printf "| %s | %.1f | %.1f | %.2f |\n", $1, $2, $3, $4 / 1048576 }' "$W/phases.txt"
fi
