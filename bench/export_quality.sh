#!/usr/bin/env bash
# The pruning quality table of docs/benchmarks.md ("Export"): for each model,
# a profile (its REAP and usage, no sensitivity), exports at 12.5%, 25% and
# 50% of the experts ranked by reap, usage and random, then bench/export_quality
# of all of them against the source on the first 16 KiB of the four eval texts.
# A ranking a model refuses (DeepSeek's router groups at 12.5%) is listed.
#
#   bench/export_quality.sh BUILD WORKDIR [MODEL...]   (default: data/tinymoe and ../shared/models/*-small)
#   python3 bench/export_quality_table.py WORKDIR      (the markdown table)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$1" work="$2"
shift 2
eq="$build/expertquant" quality="$build/bench/export_quality"
shared="${EQ_SHARED_DIR:-$root/../shared}"
corpus="$shared/corpus"
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  models=("$root/data/tinymoe")
  for m in qwen3moe-small qwen3_next-small qwen3_5_moe-small deepseek_v3-small glm4_moe-small gpt_oss-small; do
    models+=("$shared/models/$m")
  done
fi
mkdir -p "$work"
: > "$work/results.jsonl"
: > "$work/refused.jsonl"
for m in "${models[@]}"; do
  n="$(basename "$m")"
  profile="$work/$n.profile.json"
  [ -e "$profile" ] || "$eq" profile --model "$m" --calib "$corpus/calib_mixed.txt" --max-tokens 32768 --ctx 512 \
    --no-sensitivity -o "$profile" > "$work/$n.profile.log" 2>&1
  exports=()
  for fraction in 0.125 0.25 0.5; do
    for rank in reap usage random; do
      out="$work/$n-$fraction-$rank"
      if "$eq" export --model "$m" --profile "$profile" -o "$out" --prune-fraction "$fraction" --rank-by "$rank" \
        --force --json-out "$out.json" > "$out.log" 2>&1; then
        exports+=(--export "$out")
      else
        python3 -c 'import json,sys; print(json.dumps({"model": sys.argv[1], "refused": sys.argv[2]}))' \
          "$out" "$(tail -1 "$out.log")" >> "$work/refused.jsonl"
      fi
    done
  done
  "$quality" --source "$m" "${exports[@]}" --text "$corpus/eval_python.txt" --text "$corpus/eval_c.txt" \
    --text "$corpus/eval_prose.txt" --text "$corpus/eval_troff.txt" --ctx 512 --max-bytes 16384 >> "$work/results.jsonl"
done
echo "export_quality.sh: results in $work/results.jsonl; table: python3 bench/export_quality_table.py $work"
