#!/bin/bash
# pack --device cuda against --device cpu on every model folder under MODELS,
# one --uniform pack per format of FORMATS on each device; the output shards
# are compared byte for byte (docs/benchmarks.md, "GPU quantizers"):
#   bench/cuda_shared_check.sh EXPERTQUANT MODELS [> log]
# A format a model's shapes cannot take is refused by both devices; the line
# shows both errors.
set -u
eq=$1 models=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
for m in "$models"/*; do
  for f in ${FORMATS:-fp4_g32 mxfp4 nvfp4 int4_g64 int2_g32 trellis2 trellis3_lut trellis4}; do
    for d in cpu cuda; do
      rm -rf "$out/$d"
      s=$(date +%s%N)
      "$eq" pack --model "$m" --uniform "$f" -o "$out/$d" --device $d > "$out/log-$d" 2>&1
      echo $? > "$out/rc-$d"
      echo $(( ($(date +%s%N) - s) / 1000000 )) > "$out/ms-$d"
    done
    rc_cpu=$(cat "$out/rc-cpu") rc_cuda=$(cat "$out/rc-cuda")
    if [ "$rc_cpu" = 0 ] && [ "$rc_cuda" = 0 ]; then
      n=0 differ=0
      for sh in "$out"/cpu/*.safetensors; do
        n=$((n + 1))
        cmp -s "$sh" "$out/cuda/$(basename "$sh")" || differ=$((differ + 1))
      done
      echo "$(basename "$m") $f: $n shards, $differ differ (cpu $(cat "$out/ms-cpu") ms, cuda $(cat "$out/ms-cuda") ms)"
    else
      echo "$(basename "$m") $f: exit cpu $rc_cpu cuda $rc_cuda: $(tail -1 "$out/log-cpu" | cut -c1-150) | $(tail -1 "$out/log-cuda" | cut -c1-150)"
    fi
  done
done
