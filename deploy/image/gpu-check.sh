#!/usr/bin/env bash
# The checks that need a GPU: run from a checkout on a CUDA machine whose Python ($PYTHON, default python3) has
# the project's dependencies (the step image's, or `make venv`'s). Trains, resumes, is preempted, evaluates, serves
# and load-tests on the GPU, refuses a rank the node has no GPU for, runs the unit tests of those steps with CUDA
# present, and trains a 200M-parameter model fully and with LoRA. Writes the JSON reports to $OUT (default: a
# temporary directory) and exits non-zero at the first check that fails. docs/image.md has the figures of a run.
# WHEELS=DIR installs the wheels in DIR first (a machine whose Python lacks some of the dependencies).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d -t vcpilot-gpu-XXXX)}
W=$(mktemp -d -t vcpilot-gpu-work-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$W/site" "$WHEELS"/*.whl
    export PYTHONPATH=$W/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$SECONDS
step() { echo "=== $1 ($((SECONDS - T0)) s)"; }
fail() { echo "FAILED: $1" >&2; exit 1; }
field() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, transformers; assert torch.cuda.is_available(), 'torch sees no GPU'
print('torch', torch.__version__, 'transformers', transformers.__version__, 'bf16', torch.cuda.is_bf16_supported())"
$PY -m components.demo --out "$W/demo" > /dev/null  # the demo's shop catalog: the first champion's data
D=$W/demo/data/baseline
FT="$PY -m components.finetune --data $D --log-every 100"

step "train 200 steps on the GPU, a checkpoint every 50"
$FT --out "$W/out" --max-steps 200 --checkpoint-every 50 --json > "$OUT/train.json"
[ "$(field "$OUT/train.json" steps_run)" = 200 ] || fail "training did not run 200 steps"
step "resume from the newest checkpoint to 300"
$FT --out "$W/out" --max-steps 300 --checkpoint-every 50 --resume auto --json > "$OUT/resume.json"
[ "$(field "$OUT/resume.json" resumed_from)" = "$W/out-checkpoints/step-200" ] || fail "did not resume from step 200"

step "SIGTERM mid-training (a preemption): checkpoint, exit 143, resume"
$FT --out "$W/pre" --max-steps 100000 --checkpoint-every 100000 > "$W/pre.log" 2>&1 &
for _ in $(seq 120); do sleep 1; grep -q "step 200/" "$W/pre.log" && break; done
kill -TERM $!; rc=0; wait $! || rc=$?
[ $rc = 143 ] || fail "a SIGTERM'd rank exited $rc, not 143: $(tail -3 "$W/pre.log")"
s=$(ls "$W/pre-checkpoints" | sed -n 's/^step-\([0-9]*\)$/\1/p' | sort -n | tail -1)
$FT --out "$W/pre" --max-steps $((s + 20)) --resume auto --json > "$OUT/preempt_resume.json"
[ "$(field "$OUT/preempt_resume.json" steps_run)" = 20 ] || fail "the preempted run did not continue from step $s"

step "a second local rank on a node with one GPU is refused in one sentence"
rc=0
WORLD_SIZE=2 RANK=1 LOCAL_RANK=$($PY -c "import torch; print(torch.cuda.device_count())") MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=29511 $FT --out "$W/two" --max-steps 5 2> "$W/two.err" || rc=$?
[ $rc = 1 ] && grep -q "has no GPU" "$W/two.err" || fail "exit $rc: $(cat "$W/two.err")"

step "evaluate on the GPU"
$PY -m components.evaluate --model "$W/out" --dataset-dir "$D" --json > "$OUT/eval.json"
step "serve on the GPU and load-test it"
port=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
$PY -m components.serving --model "$W/out" --host 127.0.0.1 --port "$port" --device cuda > "$W/serve.log" 2>&1 &
server=$!
VC_SERVER_HOSTS=127.0.0.1 $PY -m components.loadtest --port "$port" --report "$OUT/load.json" --requests 400 --concurrency 16 \
    --max-tokens 32 --dataset "$D/eval.jsonl" --wait-s 120
[ "$(field "$OUT/load.json" errors)" = 0 ] || fail "the load test saw errors"
grep -q "(cuda)" "$W/serve.log" || fail "the server did not run on the GPU: $(tail -3 "$W/serve.log")"
kill $server

if [ -d tests/unit ]; then
    step "the unit tests of finetune, serving and evaluate, with CUDA present"
    $PY -m pytest -q -p no:cacheprovider -o addopts=--strict-markers tests/unit/finetune tests/unit/serving \
        tests/unit/evaluate
fi

step "a 200M-parameter model (hidden 1024, 12 layers), fully and with LoRA"
$PY -c "import sys; from components.lm.tiny import create_tiny_model as c; c(sys.argv[1], hidden=1024, layers=12, heads=16)" \
    "$W/base"
for mode in full lora; do
    flags=(--data "$D" --base-model "$W/base" --micro-batch 12 --checkpoint-every 20 --log-every 20)
    [ $mode = lora ] && flags+=(--lora)
    $PY -m components.finetune "${flags[@]}" --out "$W/$mode" --max-steps 40 --json > "$OUT/$mode.json"
    $PY -m components.finetune "${flags[@]}" --out "$W/$mode" --max-steps 60 --resume auto --json \
        > "$OUT/$mode-resume.json"
    [ "$(field "$OUT/$mode-resume.json" steps_run)" = 20 ] || fail "$mode did not resume from step 40"
    du -sh "$W/$mode-checkpoints/step-40"
done
step "all passed; the reports are in $OUT"
