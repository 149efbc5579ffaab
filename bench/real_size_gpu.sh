#!/bin/bash
# Real-size run of the default pipeline on a GPU machine (docs/benchmarks.md,
# "Real-size runs"): a random-weight checkpoint of LAYERS layers at
# Qwen3-30B-A3B's shapes (bench/synth_checkpoint), then the default profile
# and the default pack of it on the GPUs named by DEVICE, each timed (wall,
# CPU of the process and its children, peak RSS).
#   bench/real_size_gpu.sh BUILD WORKDIR STEP...
# STEP: profile or pack. Environment (defaults in brackets):
#   LAYERS [4]   SYNTH_ARGS (more synth_checkpoint options) []   DEVICE [cuda]   TOKENS [4096]   CALIB [data/corpus/calib_small.txt.zst]
# Each step's output goes to WORKDIR/STEP-DEVICE.log; one line per step is
# appended to WORKDIR/steps.txt:
#   step device wall_s cpu_s peak_rss_kib
set -euo pipefail
build=${1:?usage: bench/real_size_gpu.sh BUILD WORKDIR STEP...}; W=${2:?}; shift 2
LAYERS=${LAYERS:-4} DEVICE=${DEVICE:-cuda} TOKENS=${TOKENS:-4096} CALIB=${CALIB:-data/corpus/calib_small.txt.zst}
mkdir -p "$W"
[ -f "$W/model/config.json" ] || "$build/bench/synth_checkpoint" "$W/model" --layers "$LAYERS" ${SYNTH_ARGS:-} > "$W/synth.log"
tag=$(echo "$DEVICE" | tr ':,' '__')
timed() {  # timed STEP COMMAND...: runs it, appends its figures to steps.txt
  local step=$1; shift
  python3 - "$W/steps.txt" "$step" "$DEVICE" "$@" <<'PY'
import resource, subprocess, sys, time
out, step, device, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
t = time.monotonic()
with open(f"{out.rsplit('/', 1)[0]}/{step}-{device.replace(':', '_').replace(',', '_')}.log", "w") as log:
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
wall = time.monotonic() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
line = f"{step} {device} {wall:.1f} {u.ru_utime + u.ru_stime:.1f} {u.ru_maxrss}"
print(line, "exit", rc, flush=True)
if rc == 0:
    open(out, "a").write(line + "\n")
sys.exit(rc)
PY
}
for step in "$@"; do
  case $step in
    profile) timed profile "$build/expertquant" profile --model "$W/model" --calib "$CALIB" --max-tokens "$TOKENS" \
               --device "$DEVICE" -o "$W/profile-$tag.json" --summary --force ;;
    pack) timed pack "$build/expertquant" pack --model "$W/model" --profile "$W/profile-$tag.json" \
            -o "$W/packed-$tag" --device "$DEVICE" --force ;;
    *) echo "real_size_gpu: unknown step $step" >&2; exit 2 ;;
  esac
done
