#!/bin/bash
# The GPU run behind docs/benchmarks.md, "GPU quantizers", in one command:
#   bench/cuda_run.sh BUILD LOGDIR
# BUILD is a -DEQ_CUDA=ON build folder holding expertquant, test_cuda and
# bench/quant_device (built there, or carried with its CTest files; extra
# shared libraries may sit in devlibs/). Runs the `cuda` tests, compute-sanitizer
# (memcheck) on the test binary once, the throughput bench (BENCH_ARGS), and
# pack wall times (PACK_POLICIES, EXPERTS; PACK_ONLY=1 runs only these)
# of a Qwen3-30B-A3B-shaped layer slice (hidden 2048, experts [768, 2048]) on
# the CPU and the GPU; every output goes to LOGDIR.
set -u
build=$1 logs=$2
mkdir -p "$logs"
[ -d devlibs ] && export LD_LIBRARY_PATH=$PWD/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; git log -1 --format=%H 2>/dev/null; } > "$logs/machine.txt" 2>&1

if [ -z "${PACK_ONLY:-}" ]; then
ctest --test-dir "$build" -L cuda --output-on-failure > "$logs/ctest.log" 2>&1
echo "ctest -L cuda: exit $?" | tee -a "$logs/ctest.log"
compute-sanitizer --tool memcheck --error-exitcode 9 "$build/test_cuda" --gtest_filter=DeviceQuantize.StreamFormatsRandomWeights:DeviceQuantize.TrellisRandomWeights > "$logs/sanitizer.log" 2>&1
echo "compute-sanitizer: exit $?" | tee -a "$logs/sanitizer.log"
"$build/bench/quant_device" ${BENCH_ARGS:-} > "$logs/bench.log" 2>&1
echo "quant_device: exit $?" | tee -a "$logs/bench.log"
fi

# pack: EXPERTS experts of one layer (a Qwen3-30B-A3B layer has 128), each
# policy on the CPU and on the GPU; "default" is the default policy's formats
# in a 1:5:2 mix (int8_row : fp4_g32 : trellis2, 4.3 bits), as an allocation.
experts=${EXPERTS:-8}
ckpt=/tmp/eq-synthetic
python3 bench/make_synthetic_checkpoint.py "$ckpt" --experts "$experts" --layers 1 > /dev/null
python3 - "$experts" > /tmp/eq-default-mix.json <<'PY'
import json, sys
n = int(sys.argv[1])
mix = [("critical", "int8_row")] + [("standard", "fp4_g32")] * 5 + [("deprioritized", "trellis2")] * 2
experts = [{"class": c, "format": f} for c, f in (mix * n)[:n]]
print(json.dumps({"schema": "expertquant.allocation", "version": 1, "layers": [{"layer": 0, "experts": experts}]}))
PY
{
  echo "checkpoint: 1 layer, $experts experts of [768, 2048] x 3 (bf16)"
  for policy in ${PACK_POLICIES:-default fp4_g32 int4_g32 trellis2 trellis3}; do
    if [ "$policy" = default ]; then opt="--allocation /tmp/eq-default-mix.json"; else opt="--uniform $policy"; fi
    for dev in cpu cuda; do
      rm -rf "/tmp/eq-pack-$policy-$dev"
      s=$(date +%s%N)
      "$build/expertquant" pack --model "$ckpt" $opt -o "/tmp/eq-pack-$policy-$dev" --device "$dev" > /dev/null 2>&1
      rc=$?
      e=$(date +%s%N)
      echo "$policy $dev exit=$rc wall_ms=$(( (e - s) / 1000000 ))"
    done
    if cmp -s /tmp/eq-pack-$policy-cpu/model-00001-of-00001.safetensors /tmp/eq-pack-$policy-cuda/model-00001-of-00001.safetensors; then
      echo "$policy: shards byte-identical"
    else
      echo "$policy: shards DIFFER"
    fi
  done
} > "$logs/pack.log" 2>&1
cat "$logs/pack.log"
