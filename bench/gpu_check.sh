#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, CUDA toolkit and Python
# (no LLVM/MLIR), runs what bench/gpu_prepare.py compiled on a development
# machine (carry .gpucheck/) and prints one table, every part in its own
# process under its own time limit, ordered by what its result is worth:
#
#   numerics   megc-run --device cuda on every case against the CPU
#              runtime's outputs (bench/gpu_compare.py)
#   kernels    per-kernel bandwidth and attention TFLOP/s of the llama step
#   step       the llama step against PyTorch eager and torch.compile
#   gtests     the runtime's CUDA GoogleTests (CUDA and cuDNN tests only)
#   nccl       the runtime's NCCL group tests
#   memcheck   compute-sanitizer memcheck over one llama training step
#              (skipped where the machine has no compute-sanitizer)
#   reference  megc's llama against PyTorch autograd and AdamW
#   library    fused RoPE and a GEMM against PyTorch
#   cpu-train  the CPU training step against PyTorch CPU eager
#
# A part that fails, runs out of time or is skipped for lack of time counts
# in the exit status and in the table; the whole check ends within
# GPU_CHECK_SECONDS (default 420) of its start.
#
#   here:  /usr/bin/python3 bench/gpu_prepare.py
#          bash bench/gpu_check.sh --dry-run   (every part resolves; no GPU)
#   there: bash bench/gpu_check.sh   (GPU_CHECK_BUILD=1: build the runtime
#          there rather than use gpu_prepare.py's megc-run)
#   one device call: timeout_s 480, carry .gpucheck, command
#          bash bench/gpu_check.sh   (logs come back as $OUT/logs.tar.gz)
set -uo pipefail
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}
cd "$(dirname "$0")/.."
root=$(pwd)
check=$root/.gpucheck
out=/tmp/megc-gpucheck
build=/tmp/megrt-cuda-build
budget=${GPU_CHECK_SECONDS:-420}
dry=0
[[ ${1:-} == --dry-run ]] && dry=1
start=$(date +%s)
deadline=$(( start + budget ))
mkdir -p "$out"

# The runtime's tests that need a CUDA device: their suite or parameter
# names say CUDA or cuDNN (the dry run checks that every selected test's
# does).
gtest_filter='*/cuda:*OnCuda*:*OnCudnn*:AttentionCuda*:AttentionCudnn*:CudaGraphs*:CudaSession*:EmbeddingGradCuda*'

pack() {
  [[ -n ${OUT:-} ]] && tar -czf "$OUT/logs.tar.gz" -C "$out" . && echo "logs: \$OUT/logs.tar.gz"
}
(( dry )) || trap pack EXIT

names=() results=() seconds=() notes=()
failed=0

record() {  # record NAME RESULT SECONDS NOTE
  names+=("$1") results+=("$2") seconds+=("$3") notes+=("$4")
  [[ $2 == PASS || $2 == SKIP ]] || failed=1
  printf '== %-10s %-8s %4s s  %s\n' "$1" "$2" "$3" "$4"
}

# resolves PATH...: each exists (a .py file also compiles).
resolves() {
  local path
  for path; do
    if [[ ! -e $path ]]; then
      echo "missing: $path"
      return 1
    fi
    if [[ $path == *.py ]] && ! python3 -m py_compile "$path"; then
      echo "does not compile: $path"
      return 1
    fi
  done
}

# part NAME CAP NEEDS -- COMMAND...: runs COMMAND for at most CAP seconds
# or what is left of the budget, its output in $out/NAME.log; NEEDS lists
# the files it needs (checked by the dry run and before running).
part() {
  local name=$1 cap=$2
  shift 2
  local needs=()
  while [[ $1 != -- ]]; do needs+=("$1"); shift; done
  shift
  local problem
  if ! problem=$(resolves "${needs[@]}"); then
    record "$name" FAIL 0 "$problem"
    return
  fi
  if (( dry )); then
    local command="$*"
    record "$name" PASS 0 "resolves (limit ${cap} s): ${command%%$'\n'*}"
    return
  fi
  local now left limit began status note
  now=$(date +%s)
  left=$(( deadline - now ))
  if (( left < 10 )); then
    record "$name" NOTIME 0 "the check's ${budget} s were spent"
    return
  fi
  limit=$(( cap < left ? cap : left ))
  began=$now
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  status=$?
  note=$(grep -v '^\s*$' "$out/$name.log" | tail -1 | cut -c1-110)
  if (( status == 0 )); then
    record "$name" PASS $(( $(date +%s) - began )) "$note"
  elif (( status == 124 )); then
    record "$name" TIMEOUT "$limit" "after ${limit} s: $note"
  else
    record "$name" FAIL $(( $(date +%s) - began )) "exit $status: $note"
  fi
}

echo "== device"
if (( ! dry )); then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm \
    --format=csv,noheader || echo "nvidia-smi failed"
fi
if [[ ! -d $check/cases ]]; then
  echo "no $check/cases: run bench/gpu_prepare.py first" >&2
  exit 1
fi
echo "carried: $(du -sm "$check" | cut -f1) MiB in $check"

if [[ -z ${GPU_CHECK_BUILD:-} ]]; then
  mkdir -p "$build"
  (( dry )) || cp "$check/deps/bin/megc-run" "$build/megc-run"
  resolves "$check/deps/bin/megc-run" >/dev/null ||
    record runtime FAIL 0 "no megc-run in $check/deps/bin"
else
  part runtime 120 "$check/deps/bin/flatc" -- bash -c "
    cmake -S runtime -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEGRT_BUILD_TESTS=OFF -DMEGRT_CPU_BLAS=OFF -DMEGRT_CUDA=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_FlatBuffers=ON \
      -DMEGRT_FLATC='$check/deps/bin/flatc' \
      -DMEGRT_FLATBUFFERS_INCLUDE_DIR='$check/deps/include' \
      -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
      -DMEGRT_NLOHMANN_JSON_INCLUDE_DIR='$check/deps/include' \
      -DMEGRT_NCCL_INCLUDE_DIR='$check/deps/nccl' \
      -DMEGRT_CUDNN=ON \
      -DMEGRT_CUDNN_FRONTEND_INCLUDE_DIR='$check/deps/cudnn_frontend/include' \
      -DMEGRT_CUDNN_INCLUDE_DIR='$check/deps/cudnn' &&
    cmake --build '$build' -j \$(nproc) &&
    c++ -O2 -std=c++17 tools/megc-run/megc-run.cpp -Iruntime/include \
      -o '$build/megc-run' '$build/libmegrt.a' -ldl -lpthread"
fi

# NCCL and cuDNN: the toolkit's, or those PyTorch's wheels bring.
for package in nccl cudnn; do
  lib_dir=$(python3 -c "import nvidia.$package, os; print(os.path.join(list(nvidia.$package.__path__)[0], 'lib'))" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$lib_dir:$LD_LIBRARY_PATH
done

# The GPU tests are those the filter selects, and only those.
tests=$check/deps/bin/megrt-tests
if (( dry )) && [[ -x $tests ]]; then
  selected=$("$tests" --gtest_list_tests --gtest_filter="$gtest_filter" |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
  others=$(grep -viE 'cuda|cudnn' <<<"$selected")
  if [[ -z $selected || -n $others ]]; then
    record gtest-filter FAIL 0 "selects $(wc -l <<<"$selected") tests, CPU tests among them: ${others//$'\n'/ }"
  else
    record gtest-filter PASS 0 "selects $(wc -l <<<"$selected") CUDA and cuDNN tests, no CPU test"
  fi
fi

run=$build/megc-run
train=$check/cases/llama_f32_train
part numerics 120 bench/gpu_compare.py "$check/cases" -- \
  python3 bench/gpu_compare.py --megc-run "$run" --cases "$check/cases" --out "$out"
part kernels 45 bench/gpu_bench.py "$check/bench/llama_grad/model.megc" -- \
  python3 bench/gpu_bench.py --megc-run "$run" --out "$out" --part kernels
part step 75 bench/gpu_bench.py "$check/bench/llama_grad/model.megc" -- \
  python3 bench/gpu_bench.py --megc-run "$run" --out "$out" --part step
part gtests 60 "$tests" -- "$tests" --gtest_filter="$gtest_filter"
part nccl 20 "$check/deps/bin/megrt-comm-tests" -- \
  "$check/deps/bin/megrt-comm-tests" --gtest_filter='Nccl*'
if (( dry )) || command -v compute-sanitizer >/dev/null; then
  part memcheck 45 "$train/model.megc" "$train/case.json" -- bash -c "
    cd '$train' && compute-sanitizer --tool memcheck --error-exitcode 3 \
      --leak-check no '$run' model.megc \$(python3 -c '
import json
args = json.load(open(\"case.json\"))[\"args\"]
at = args.index(\"--steps\")
print(\" \".join(args[:at] + [\"--steps\", \"1\"] + args[at + 2:]))') \
      --device cuda"
else
  record memcheck SKIP 0 "no compute-sanitizer on this machine"
fi
part reference 40 bench/torch_reference.py "$check/cases" -- \
  python3 bench/torch_reference.py --cases "$check/cases"
part library 40 bench/gpu_bench.py "$check/bench/rope_f32/model.megc" \
  "$check/bench/gemm_bf16/model.megc" -- \
  python3 bench/gpu_bench.py --megc-run "$run" --out "$out" --part library
part cpu-train 40 bench/cpu_train_bench.py "$check/bench/megc-run-cpu.gz" -- \
  bash -c "gunzip -c '$check/bench/megc-run-cpu.gz' >'$build/megc-run-cpu' &&
    chmod +x '$build/megc-run-cpu' &&
    python3 bench/cpu_train_bench.py --megc-run '$build/megc-run-cpu'"

echo
echo "GPU check$( (( dry )) && echo ' (dry run)') in $(( $(date +%s) - start )) s of $budget:"
printf '%-12s %-8s %6s  %s\n' part result seconds note
for i in "${!names[@]}"; do
  printf '%-12s %-8s %6s  %s\n' "${names[$i]}" "${results[$i]}" \
    "${seconds[$i]}" "${notes[$i]}"
done
for name in numerics kernels step library; do
  [[ -f $out/$name.log ]] || continue
  echo
  echo "-- $name"
  case $name in
    numerics) sed -n '/^case /,$p' "$out/$name.log" ;;
    *) grep -E '^(llama|RoPE|GEMM|device copy)' "$out/$name.log" | tail -20 ;;
  esac
done
echo "gpu check exit status $failed"
exit $failed
