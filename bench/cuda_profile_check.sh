#!/bin/bash
# profile's sensitivity measurement on the CPU and on the GPU, compared:
#   bench/cuda_profile_check.sh EXPERTQUANT LOGDIR
# EXPERTQUANT is a -DEQ_CUDA=ON build's binary. Profiles data/tinymoe (16,384
# tokens of data/corpus/calib_small, the default policy: every sensitivity
# format) with --device cpu and --device cuda, and prints how many fields of
# the two profile.json files differ (timings left out). docs/benchmarks.md,
# "GPU quantizers".
set -u
eq=$1 logs=$2
mkdir -p "$logs"
for dev in cpu cuda; do
  s=$(date +%s%N)
  "$eq" profile --model data/tinymoe --calib data/corpus/calib_small.txt.zst --max-tokens 16384 \
    -o "$logs/profile-$dev.json" --force --device "$dev" --json > "$logs/profile-$dev.out" 2> "$logs/profile-$dev.err"
  echo "profile --device $dev exit=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" | tee -a "$logs/profile.log"
done
python3 - "$logs/profile-cpu.json" "$logs/profile-cuda.json" <<'PY' | tee -a "$logs/profile.log"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
skip = {'seconds', 'format_seconds', 'timing', 'seconds_pass', 'seconds_sensitivity', 'importance_file'}
def walk(x, y, path, diffs):
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if k in skip: continue
            if k not in x or k not in y: diffs.append(path + '/' + k); continue
            walk(x[k], y[k], path + '/' + k, diffs)
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y): diffs.append(path + ' (length)'); return
        for i, (u, v) in enumerate(zip(x, y)): walk(u, v, path + '/' + str(i), diffs)
    elif x != y:
        diffs.append(path)
d = []
walk(a, b, '', d)
print('profile.json cpu vs cuda: %d differing fields%s' % (len(d), (': ' + ', '.join(d[:10])) if d else ''))
print('sensitivity formats:', a.get('sensitivity_formats'))
PY
