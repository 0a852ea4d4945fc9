#!/usr/bin/env bash
# Record rocroof's NVIDIA example captures and the llama.cpp marker-hook overhead on one GPU.
#
# Runs from the repository root on a machine with an NVIDIA GPU, nvcc, cmake, ninja and Nsight
# Compute, and no network: everything it needs travels in .device/ (made on a connected machine):
#   .device/llama-trimmed.tar.gz   tools/llama.cpp/trim.sh output (patched llama.cpp source)
#   .device/whl/*.whl              SQLAlchemy, gguf and their pure-Python needs, for python3 there
#   .device/debs/*.deb             libdw1, libelf1 (+ lzma, bz2, zstd) for nsys' QdstrmImporter
#
#   OUT=/tmp/rec bash tools/h200/record.sh [all|overhead|sweep|check|real1|real2|real3|flops]
#
# "all": build with GGML_CUDA_MARKERS=ON, write the tiny models (tools/models), run
# `rocroof collect --profiler ncu` for each example case, then time llama-bench with the hook
# off / on / CUDA graphs on (WITH_DIFF_CASES=1, the default, adds a repeat of the decode case and
# the decode case with GGML_CUDA_DISABLE_FUSION=1, for rocroof diff). "overhead": build with and
# without the option, then time
# llama-bench in round-robin over: graphs on, hook compiled in but off, hook on, no option.
# "sweep": build with the hook, write the tiny models, re-record the moe-prefill example case on
# GPU 0, then run configs/sweeps/h200-tiny.yaml with the local executor on every GPU
# (--gpus 0,1,...) until SWEEP_DEADLINE (s since start; then Ctrl-C, which stops it cleanly), and
# print each point's GPU as its nsys report saw it (PCI bus id) beside nvidia-smi's list.
# "check": build with the hook, run the copy-bandwidth probe alone and in one ncu collect, then
# time llama-bench in round-robin over graphs on / hook compiled in but off / hook on.
# "real1": build, write the 28-layer dense Q4_K_M model, time a plain 16-token llama-completion, then
# `rocroof collect` it with default settings (counter sample, roofline counters) and report.
# "real2" (best on the same warm machine): the 24-layer MoE collect, llama-cli under collect, and
# decode rounds of the hook on vs compiled in but off (for tools/h200/overhead.py).
# "ops-decode" / "ops-prefill": the counter probe, then the dense model's first decoded token / prompt
# ubatch with the ops preset (tensor, integer and per-opcode metrics): measured operations.
# Results land in $OUT: log.txt, captures.tar.gz (raw exports, no .ncu-rep/.nsys-rep), bench.tar.gz.
set -uo pipefail
mode="${1:-all}"
OUT="${OUT:-/tmp/rocroof-record}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$(date +%s)
step() { echo "=== [$(($(date +%s) - T0))s] $*"; }
ROOT=$PWD
W=/tmp/rr
mkdir -p $W/models $W/cap $W/bench $W/deb $W/lib

step "environment ($mode)"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.memory --format=csv
ncu --version | tail -1
nvcc --version | tail -1
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -1)
echo "nsys: ${NSYS:-none}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$ROOT/plugin
for f in .device/debs/*.deb; do dpkg -x "$f" $W/deb; done
cp -a $W/deb/usr/lib/x86_64-linux-gnu/. $W/deb/lib/x86_64-linux-gnu/. $W/lib/ 2>/dev/null
for lib in liblzma.so.5 libbz2.so.1.0 libzstd.so.1; do  # keep the system's own where it has them
  ldconfig -p | grep -q " $lib " && rm -f $W/lib/${lib%%.so*}*
done
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -n "$NSYS" ] && { echo "QdstrmImporter missing libs:"; ldd "$(dirname "$NSYS")/QdstrmImporter" | grep "not found"; }

tar xzf .device/llama-trimmed.tar.gz -C $W
build() {  # build DIR MARKERS(ON|OFF) JOBS
  local flag=()
  [ "$2" = OFF ] && flag=(--no-markers)
  bash tools/llama.cpp/build.sh --src $W/llama.cpp --build "$1" --backend cuda --arch 90 --jobs "$3" "${flag[@]}" \
    > "$1.log" 2>&1
  echo "build $1 rc=$?" | tee -a "$1.log"
}
bench() {  # bench NAME BIN ENV... : pp512 + tg128, 5 repetitions, two models
  local name=$1 bin=$2
  shift 2
  for m in dense-tiny dense-500m; do
    env "$@" timeout 120 "$bin/llama-bench" -m $W/models/$m.gguf -p 512 -n 128 -r 5 -o json \
      > $W/bench/$m-$name.json 2> $W/bench/$m-$name.err
    echo "bench $m $name rc=$?"
  done
}
models() {
  for p in dense-tiny moe-tiny dense-500m; do
    [ -s $W/models/$p.gguf ] && continue
    python3 tools/models/make_tiny_gguf.py --preset $p --out $W/models/$p.gguf | tail -1
  done
}

rounds() {  # rounds DEADLINE CONFIG... (NAME:BIN:ENV): llama-bench round-robin over the configurations
  # in a new random order each round: in a fixed order the last configuration came out ~2% faster
  # in decode than the same binary earlier in the round. Analyse with tools/h200/overhead.py.
  local deadline=$1 round=0
  shift
  rm -f $W/bench/*.jsonl $W/bench/*.err  # a warm machine keeps /tmp: start each measurement afresh
  while [ $(($(date +%s) - T0)) -lt "$deadline" ]; do
    round=$((round + 1))
    step "bench round $round"
    for c in $(shuf -e "$@"); do
      IFS=: read -r name bin envs <<<"$c"
      for m in dense-tiny dense-500m; do
        env $envs timeout 60 "$bin/llama-bench" -m $W/models/$m.gguf -p 512 -n 128 -r 3 -o jsonl \
          >> $W/bench/$m-$name.jsonl 2>> $W/bench/$m-$name.err
      done
    done
    tar czf "$OUT/bench.tar.gz" -C $W bench
  done
}

# Issue 14 (a real model in minutes): a 28-layer Qwen3-0.6B-shaped model (Q4_K_M mix) and a 24-layer,
# 32-expert top-8 MoE (tools/models presets), a >=64-token prompt, 16 generated tokens.
PROMPT="The engineers measured every kernel of the language model on the new accelerator, then \
compared the bytes each operation moved with the bytes the model said it should move. Where the two \
agreed, the kernel was limited by memory bandwidth; where they differed, caches, fusion or a slow \
reduction explained the gap. They wrote each finding down, because the next model would be larger, \
deeper and more sparse, and its experts would be read in a different order every token."
real_models() {
  [ -s $W/models/dense-q4km.gguf ] || python3 tools/models/make_tiny_gguf.py --preset dense-qwen3-0.6b --vocab spm \
    --out $W/models/dense-q4km.gguf | tail -1
  if [ "${1:-}" = moe ] && [ ! -s $W/models/moe-q4km.gguf ]; then
    python3 tools/models/make_tiny_gguf.py --preset moe-qwen3-30b-a3b-scaled --vocab spm --out $W/models/moe-q4km.gguf | tail -1
  fi
}
real_build() {  # real_build [--with-cli]
  if [ ! -x $W/build-on/bin/llama-completion ] || { [ "${1:-}" = --with-cli ] && [ ! -x $W/build-on/bin/llama-cli ]; }; then
    bash tools/llama.cpp/build.sh --src $W/llama.cpp --build $W/build-on --backend cuda --arch 90 --jobs 16 "$@" \
      > $W/build-on.log 2>&1
    echo "build rc=$? ($*)"
  fi
}
real_setup() {  # real_setup [moe] [build options]: build (in the background) while the models are written; sets B
  local models=()
  [ "${1:-}" = moe ] && { models=(moe); shift; }
  real_build "$@" &
  local bp=$!
  real_models ${models[@]+"${models[@]}"}
  wait $bp
  B=$W/build-on/bin
  [ -x $B/llama-completion ] || { tail -40 $W/build-on.log; exit 1; }
}
real_collect() {  # real_collect NAME DB TIMEOUT [collect options] -- APP...: one collect, its report, its scrubbed copy
  local name=$1 db=$2 limit=$3 t1
  shift 3
  t1=$(date +%s)
  PYTHONUNBUFFERED=1 timeout "$limit" python3 -m rocroof collect --out $W/cap/$name --db $db --label case=$name "$@" \
    2>&1 | tr '\r' '\n' | grep -v '^ *$' | grep -v "kernels.*ETA" | grep -v "^    \|^  [a-z]*: " | tail -16
  echo "$name collect rc=${PIPESTATUS[0]} wall $(($(date +%s) - t1)) s"
  python3 -m rocroof report --db $db --by op 2>&1 | grep -v "^key\|^the \|^peak\|^side" | tail -24
  python3 -m rocroof scrub $W/cap/$name --out $W/scrubbed/$name --gzip > /dev/null 2>&1
  tar czf "$OUT/$name.tar.gz" -C $W/scrubbed $name
}
real_rounds() {  # real_rounds DEADLINE NAME:ENV...: llama-bench decode tg64 round-robin, new random order each round
  local deadline=$1 round=0
  shift
  rm -f $W/bench/*.jsonl
  while [ $(($(date +%s) - T0)) -lt "$deadline" ]; do
    round=$((round + 1))
    for c in $(shuf -e "$@"); do
      IFS=: read -r name envs <<<"$c"
      env $envs timeout 30 $B/llama-bench -m $W/models/dense-q4km.gguf -p 0 -n 64 -r 1 -o jsonl \
        >> $W/bench/dense-q4km-$name.jsonl 2>> $W/bench/dense-q4km-$name.err
    done
  done
  echo "rounds: $round"
  tar czf "$OUT/bench.tar.gz" -C $W bench
}
if [ "$mode" = real1 ]; then
  step "build (llama-bench, llama-completion) and the dense model"
  real_setup
  step "plain llama-completion (hook compiled in, off; CUDA graphs on), twice"
  for i in 1 2; do
    t0=$(date +%s%N)
    $B/llama-completion -m $W/models/dense-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv > $W/plain-$i.log 2>&1 < /dev/null
    echo "plain run $i: rc=$? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    grep -E "prompt eval time|eval time|load time|total time" $W/plain-$i.log | tail -4
  done
  step "rocroof collect, default settings"
  real_collect dense-real $W/r.db $((${REAL_DEADLINE:-540} - ($(date +%s) - T0))) \
    -- $B/llama-completion -m $W/models/dense-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv
  python3 -m rocroof runs --db $W/r.db --notes latest 2>&1 | tail -20
  step "done"
  exit 0
fi
if [ "$mode" = real3 ]; then  # on the machine real1 left warm: dense again, the MoE, rounds
  B=$W/build-on/bin
  [ -x $B/llama-completion ] || { echo "no build: run real1 first"; exit 1; }
  step "rocroof collect, dense, default settings"
  real_collect dense-real2 $W/r3.db 260 -- $B/llama-completion -m $W/models/dense-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv
  step "MoE model and collect"
  real_models moe
  real_collect moe-real $W/r3.db 250 -- $B/llama-completion -m $W/models/moe-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv
  step "marker overhead rounds"
  real_rounds "${BENCH_DEADLINE:-540}" "off:GGML_CUDA_DISABLE_GRAPHS=1" "on:GGML_CUDA_MARKERS=1"
  step "done"
  exit 0
fi
if [ "$mode" = real2 ]; then  # REAL2_SKIP_MOE=1 on a warm machine that already ran the MoE part
  step "build llama-cli too, the MoE model"
  real_setup moe --with-cli
  left() { echo $((${BENCH_DEADLINE:-560} - ($(date +%s) - T0))); }
  if [ -z "${REAL2_SKIP_MOE:-}" ]; then
    step "rocroof collect, MoE, default settings"
    limit=$(left); [ "$limit" -gt 300 ] && limit=300
    real_collect moe-real $W/r.db "$limit" -- $B/llama-completion -m $W/models/moe-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv
    python3 -m rocroof query --db $W/r.db "SELECT run_id, op, COUNT(*) AS n, MIN(experts_used) AS min_used, MAX(experts_used) AS max_used, SUM(experts_used IS NULL) AS unread FROM op_invocation WHERE op = 'MUL_MAT_ID' GROUP BY run_id, op" 2>&1 | tail -5
  fi
  if [ -x $B/llama-cli ] && [ "$(left)" -gt 160 ]; then
    step "rocroof collect -- llama-cli --single-turn (stdin closed)"
    real_collect cli $W/r.db 150 --counters dram \
      -- $B/llama-cli -m $W/models/dense-q4km.gguf -ngl 99 -p "$PROMPT" -n 4 --single-turn
    tail -5 $W/cap/cli/trace/nsys.log
  elif [ ! -x $B/llama-cli ]; then
    tail -30 $W/build-on.log
  fi
  if [ "$(left)" -gt 60 ]; then
    step "marker overhead rounds: decode tg64, hook on vs compiled in but off (graphs off in both), graphs on"
    real_rounds "${BENCH_DEADLINE:-560}" "off:GGML_CUDA_DISABLE_GRAPHS=1" "on:GGML_CUDA_MARKERS=1" "graphs:X=1"
  fi
  step "done"
  exit 0
fi

if [ "$mode" = ops-decode ] || [ "$mode" = ops-prefill ]; then
  # Measured operations (issue "why slow"): the counter probe (tools/h200/counter-probe: known counts of
  # dp4a, FFMA, IMMA and HMMA instructions under the tensor and per-opcode metrics), then the dense
  # model's first decoded token (ops-decode: rocroof collect --counters ops, the per-opcode dp4a count
  # included) or its prompt ubatch (ops-prefill: the ops preset without the slow per-opcode metric),
  # caches not flushed. Results: log.txt, probe_details.csv, the scrubbed capture as NAME.tar.gz.
  if [ "$mode" = ops-decode ]; then
    step "counter probe"
    (cd tools/h200/counter-probe && nvcc -O3 -arch=sm_90 -o /tmp/probe probe.cu && /tmp/probe \
      && ncu --metrics sass__thread_inst_executed_true_per_opcode,sm__ops_path_tensor_src_int8.sum,sm__ops_path_tensor_src_fp16.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
        -f -o /tmp/probe /tmp/probe > /dev/null 2>&1 \
      && ncu --import /tmp/probe.ncu-rep --csv --page raw --print-metric-instances details > $OUT/probe_details.csv)
    echo "probe rc=$? $(wc -l < $OUT/probe_details.csv) lines"
  fi
  step "build (llama-completion) and the dense model"
  real_setup
  APP=($B/llama-completion -m $W/models/dense-q4km.gguf -ngl 99 -p "$PROMPT" -n 16 -no-cnv)
  if [ "$mode" = ops-decode ]; then
    step "collect dense28-decode-ops (decode token 1, ops preset, caches not flushed)"
    real_collect dense28-decode-ops $W/f.db $((590 - ($(date +%s) - T0))) --sample decode=1 --cache-control none \
      --no-bandwidth-probe --counters ops -- "${APP[@]}"
  else
    M=$(python3 -c "from rocroof.capture.profilers.nsight import PRESETS, OPCODE_METRIC as O; print(','.join(m for m in PRESETS['ops'] if m != O))")
    step "collect dense28-prefill-ops (prompt ubatch, ops preset without per-opcode, caches not flushed)"
    real_collect dense28-prefill-ops $W/f.db $((590 - ($(date +%s) - T0))) --sample prefill=1 --cache-control none \
      --no-bandwidth-probe --counters "$M" -- "${APP[@]}"
  fi
  python3 -m rocroof advise --db $W/f.db --top 8 2>&1 | tail -30
  ls -la $OUT
  step "done"
  exit 0
fi

if [ "$mode" = check ]; then
  # The current patch in one call: build with the hook (reused when a warm machine has it), run the
  # copy-bandwidth probe alone and inside one `rocroof collect --profiler ncu`, then time decode
  # with the hook on vs compiled in but off (and CUDA graphs on) in round-robin until the deadline.
  step "build with the hook, models"
  if [ ! -x $W/build-on/bin/llama-bench ]; then
    build $W/build-on ON 16 &
    bp=$!
    models
    wait $bp
  fi
  models
  B=$W/build-on/bin
  [ -x $B/llama-bench ] || { tail -40 $W/build-on.log; exit 1; }
  step "bandwidth probe alone"
  python3 -m rocroof.analysis.bandwidth --out "$OUT/bandwidth.json"
  echo "probe rc=$?"
  cat "$OUT/bandwidth.json"
  step "collect dense-prefill (ncu, with the probe)"
  timeout 240 python3 -m rocroof collect --profiler ncu --out $W/cap/dense-prefill --db $W/r.db \
    --label case=dense-prefill --counters dram -- $B/llama-bench -m $W/models/dense-tiny.gguf -p 512 -n 0 -r 1 2>&1 | tail -30
  echo "collect rc=${PIPESTATUS[0]}"
  tar czf "$OUT/captures.tar.gz" -C $W/cap --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' .
  python3 -m rocroof report --db $W/r.db --by op --top 5 2>&1 | tail -25
  rounds "${BENCH_DEADLINE:-560}" "graphs:$B:" "hook-off:$B:GGML_CUDA_DISABLE_GRAPHS=1" "hook-on:$B:GGML_CUDA_MARKERS=1"
  step "done"
  exit 0
fi

if [ "$mode" = overhead ]; then
  # Build with the hook, then without the option; then alternate the configurations round by
  # round (the host is shared: throughput drifts by 10-30% between minutes) until time runs out.
  step "build with the hook, models"
  build $W/build-on ON 16 &
  bp=$!
  models
  wait $bp
  step "build without the option"
  build $W/build-off OFF 16 &
  bp=$!
  while kill -0 $bp 2>/dev/null && [ $(($(date +%s) - T0)) -lt "${OFF_BUILD_DEADLINE:-420}" ]; do sleep 5; done
  kill -0 $bp 2>/dev/null && { kill $bp; pkill ninja; echo "no-option build stopped at the deadline"; }
  wait $bp
  configs=("graphs:$W/build-on/bin:" "hook-off:$W/build-on/bin:GGML_CUDA_DISABLE_GRAPHS=1"
    "hook-on:$W/build-on/bin:GGML_CUDA_MARKERS=1")
  [ -x $W/build-off/bin/llama-bench ] && configs+=("no-option:$W/build-off/bin:GGML_CUDA_DISABLE_GRAPHS=1")
  rounds "${BENCH_DEADLINE:-540}" "${configs[@]}"
  step "done"
  exit 0
fi

if [ "$mode" = sweep ]; then
  step "build with the hook, models"
  build $W/build-on ON "$(nproc)" &
  bp=$!
  models
  wait $bp
  B=$W/build-on/bin
  [ -x $B/llama-bench ] || { tail -40 $W/build-on.log; exit 1; }
  nvidia-smi --query-gpu=index,pci.bus_id,name --format=csv
  gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
  if [ -f .device/sweep.tar.gz ]; then  # resume a sweep recorded on an earlier machine (its database and out dir)
    tar xzf .device/sweep.tar.gz -C $W
    step "resuming the sweep of .device/sweep.tar.gz"
  else
  step "collect moe-prefill (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m rocroof collect --profiler ncu --out $W/cap/moe-prefill --db $W/r.db \
    --label case=moe-prefill --counters roofline -- $B/llama-bench -m $W/models/moe-tiny.gguf -p 64 -n 0 -r 1 2>&1 | tail -5
  tar czf "$OUT/captures.tar.gz" -C $W/cap --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' .
  fi
  step "sweep configs/sweeps/h200-tiny.yaml --gpus $gpus"
  left=$(( ${SWEEP_DEADLINE:-545} - ($(date +%s) - T0) ))
  (while sleep 2; do nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader \
    | sed "s/^/$(($(date +%s) - T0)) /"; done) > $W/apps.log 2>&1 &
  mon=$!
  (cd $W && PATH=$B:$PATH PYTHONUNBUFFERED=1 timeout -s INT -k 30 $left \
    python3 -m rocroof sweep "$ROOT/configs/sweeps/h200-tiny.yaml" --gpus "$gpus" 2>&1 | tr '\r' '\n' | grep -v '^ *$' | tail -60)
  kill $mon
  step "pinning: GPU processes seen every 2 s (t, bus id, pid, name): first/last sighting per pid"
  awk '{k=$2" "$3" "$4; if(!(k in a)){a[k]=$1; o[++n]=k} b[k]=$1} END{for(i=1;i<=n;i++) print o[i], a[o[i]]"s-"b[o[i]]"s"}' $W/apps.log
  step "pinning: each point's GPU in its nsys report"
  python3 - $W/rocroof-out/sweeps/h200-tiny <<'PY'
import json, sqlite3, sys
from pathlib import Path
for st in sorted(Path(sys.argv[1]).glob("*.json")):
    db = st.with_suffix("") / "trace" / "nsys.sqlite"
    gpus = sqlite3.connect(db).execute("SELECT busLocation, cuDevice FROM TARGET_INFO_GPU").fetchall() if db.exists() else []
    s = json.loads(st.read_text())
    print(st.stem, "state", s.get("state"), "sweep gpu", s.get("gpu"), "nsys saw", gpus)
PY
  tar czf "$OUT/sweep.tar.gz" -C $W --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' \
    rocroof-out rocroof-sweeps.db
  step "done"
  exit 0
fi

step "build with the hook, models"
if [ ! -x $W/build-on/bin/llama-bench ]; then
  build $W/build-on ON 16 &
  bp=$!
  models
  wait $bp  # not a bare wait: that also waits for the tee of the log
fi
B=$W/build-on/bin
[ -x $B/llama-bench ] || { tail -40 $W/build-on.log; exit 1; }

collect() {  # collect NAME ROCROOF-OPTIONS... -- APP...
  local name=$1
  shift
  step "collect $name"
  timeout 200 python3 -m rocroof collect --profiler ncu --out $W/cap/$name --db $W/r.db --label case=$name "$@" 2>&1 | tail -30
  echo "collect $name rc=${PIPESTATUS[0]}"
  tar czf "$OUT/captures.tar.gz" -C $W/cap --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' .
}
collect dense-prefill --counters roofline -- $B/llama-bench -m $W/models/dense-tiny.gguf -p 512 -n 0 -r 1
collect moe-prefill --counters roofline -- $B/llama-bench -m $W/models/moe-tiny.gguf -p 64 -n 0 -r 1
collect dense500m-decode --counters dram -- $B/llama-bench -m $W/models/dense-500m.gguf -p 0 -n 4 -r 1
if [ "${WITH_DIFF_CASES:-1}" = 1 ]; then
  # for rocroof diff: a repeat of the same run (must come out as noise) and the same run without fusion
  collect dense500m-decode-repeat --counters dram -- $B/llama-bench -m $W/models/dense-500m.gguf -p 0 -n 4 -r 1
  GGML_CUDA_DISABLE_FUSION=1 collect dense500m-decode-nofusion --counters dram -- \
    $B/llama-bench -m $W/models/dense-500m.gguf -p 0 -n 4 -r 1
fi

if [ $(($(date +%s) - T0)) -lt 480 ]; then
  step "bench (hook compiled in)"
  bench graphs $B
  bench hook-off $B GGML_CUDA_DISABLE_GRAPHS=1
  bench hook-on $B GGML_CUDA_MARKERS=1
  bench hook-off2 $B GGML_CUDA_DISABLE_GRAPHS=1
  bench hook-on2 $B GGML_CUDA_MARKERS=1
  tar czf "$OUT/bench.tar.gz" -C $W bench
fi
python3 -m rocroof runs --db $W/r.db
step "done"
