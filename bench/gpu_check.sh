#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, CUDA toolkit, CMake and
# Python (no LLVM/MLIR), builds the runtime with its CUDA backend, runs the
# cases that bench/gpu_prepare.py compiled on a development machine (carry
# .gpucheck/) with `megc-run --device cuda` against the CPU runtime's
# outputs, checks megc's llama against PyTorch autograd and AdamW, runs the
# benchmarks against PyTorch, and prints the tables.
#
#   here:  /usr/bin/python3 bench/gpu_prepare.py
#   there: bash bench/gpu_check.sh   (GPU_CHECK_QUICK=1: tests and cases
#          only, no PyTorch reference and no benchmarks; GPU_CHECK_BUILD=1:
#          build the runtime there rather than use gpu_prepare.py's megc-run;
#          GPU_CHECK_SECONDS=N: the whole check's time, default 500)
#   one device call: timeout_s 560, carry .gpucheck, command
#          bash bench/gpu_check.sh   (logs come back as $OUT/logs.tar.gz)
set -uo pipefail
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}
cd "$(dirname "$0")/.."
root=$(pwd)
check=$root/.gpucheck
# Logs and traces are written here, and packed into $OUT/logs.tar.gz (one
# file, as the device tool returns only a few) when OUT is set.
out=/tmp/megc-gpucheck
build=/tmp/megrt-cuda-build
mkdir -p "$out"

# The whole check ends within GPU_CHECK_SECONDS (default 500, inside one
# device call's 600): each part runs for at most its own limit or what is
# left, and a part with under 10 s left is skipped and says so. The logs are
# packed into $OUT however the script ends.
deadline=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-500} ))
within() {  # within SECONDS COMMAND...: COMMAND for SECONDS or what is left
  local cap=$1 left=$(( deadline - $(date +%s) ))
  shift
  if (( left < 10 )); then
    echo "skipped (the check's ${GPU_CHECK_SECONDS:-500} s are spent): $*" >&2
    return 124
  fi
  timeout $(( cap < left ? cap : left )) "$@"
}
pack() {
  [[ -n ${OUT:-} ]] && tar -czf "$OUT/logs.tar.gz" -C "$out" . && echo "logs: \$OUT/logs.tar.gz"
}
trap pack EXIT
[[ -d $check/cases ]] || { echo "no $check/cases: run bench/gpu_prepare.py first" >&2; exit 1; }

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm \
  --format=csv,noheader || echo "nvidia-smi failed"

start=$(date +%s)
if [[ -z ${GPU_CHECK_BUILD:-} && -x $check/deps/bin/megc-run ]]; then
  echo "== runtime: megc-run built by gpu_prepare.py (GPU_CHECK_BUILD=1 builds it here)"
  mkdir -p "$build"
  cp "$check/deps/bin/megc-run" "$build/megc-run"
else
  echo "== build the runtime with CUDA"
  if ! { cmake -S runtime -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DMEGRT_BUILD_TESTS=OFF -DMEGRT_CPU_BLAS=OFF -DMEGRT_CUDA=ON \
           -DCMAKE_DISABLE_FIND_PACKAGE_FlatBuffers=ON \
           -DMEGRT_FLATC="$check/deps/bin/flatc" \
           -DMEGRT_FLATBUFFERS_INCLUDE_DIR="$check/deps/include" \
           -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
           -DMEGRT_NLOHMANN_JSON_INCLUDE_DIR="$check/deps/include" \
           $( [[ -f $check/deps/nccl/nccl.h ]] && echo "-DMEGRT_NCCL_INCLUDE_DIR=$check/deps/nccl" ) \
           -DMEGRT_CUDNN=ON -DMEGRT_CUDNN_FRONTEND_INCLUDE_DIR="$check/deps/cudnn_frontend/include" \
           -DMEGRT_CUDNN_INCLUDE_DIR="$check/deps/cudnn" &&
         cmake --build "$build" -j "$(nproc)" &&
         c++ -O2 -std=c++17 tools/megc-run/megc-run.cpp -Iruntime/include \
           -o "$build/megc-run" "$build/libmegrt.a" -ldl -lpthread; } \
       >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    echo "runtime build FAILED (log: $out/build.log)"
    exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
fi

# NCCL and cuDNN: the toolkit's, or those PyTorch's wheels bring.
for package in nccl cudnn; do
  lib_dir=$(python3 -c "import nvidia.$package, os; print(os.path.join(list(nvidia.$package.__path__)[0], 'lib'))" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$lib_dir:$LD_LIBRARY_PATH
done

echo "== runtime CUDA tests (GoogleTest, built by gpu_prepare.py)"
within 180 "$check/deps/bin/megrt-tests" --gtest_filter='Cuda*:Cubin*:*/cuda:Attention*:Cudnn*:EmbeddingGrad*:DataParallel*' \
  >"$out/gtest.log" 2>&1
echo "megrt-tests exit status $? ($(grep -c '^\[       OK' "$out/gtest.log") ok," \
  "$(grep -c '^\[  FAILED' "$out/gtest.log") failed lines)"
grep -E '^\[  FAILED|Failure|error' "$out/gtest.log" | head -20
# The fused attention's throughput (megrt's kernels and cuDNN's) and the
# embedding gradient's bandwidth.
grep -E '^\[ timing' "$out/gtest.log"
grep -c 'runs on megrt.s kernels' "$out/gtest.log" | sed 's/^/attention cases cuDNN refused: /'

echo "== NCCL groups (single rank)"
within 120 "$check/deps/bin/megrt-comm-tests" --gtest_filter='Nccl*' \
  >"$out/nccl.log" 2>&1
echo "megrt-comm-tests (Nccl*) exit status $? ($(grep -c '^\[       OK' "$out/nccl.log") ok," \
  "$(grep -c '^\[  FAILED' "$out/nccl.log") failed, $(grep -c '^\[  SKIPPED' "$out/nccl.log") skipped lines)"
grep -E '^\[  FAILED|Failure|error|SKIPPED' "$out/nccl.log" | head -10

echo "== device copy bandwidth (PyTorch, for reference)"
within 120 python3 - <<'EOF' 2>&1 | tee "$out/bandwidth.txt"
import torch
x = torch.empty(2**30 // 4, device="cuda")
y = torch.empty_like(x)
for _ in range(3):
    y.copy_(x)
torch.cuda.synchronize()
start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
start.record()
for _ in range(20):
    y.copy_(x)
stop.record()
torch.cuda.synchronize()
seconds = start.elapsed_time(stop) / 1e3 / 20
print(f"copy: {2 * x.numel() * 4 / seconds / 1e12:.2f} TB/s (read + write)")
EOF

echo "== cases (megc-run --device cuda against the CPU runtime)"
within 420 python3 bench/gpu_compare.py --megc-run "$build/megc-run" \
  --cases "$check/cases" --out "$out"
status=$?

if [[ -n ${GPU_CHECK_QUICK:-} ]]; then
  echo "gpu check (quick) exit status $status"
  exit $status
fi

echo "== PyTorch reference (transformers LlamaForCausalLM, float64 autograd and AdamW)"
within 180 python3 bench/torch_reference.py --cases "$check/cases" || status=1

echo "== benchmarks"
within 300 python3 bench/gpu_bench.py --megc-run "$build/megc-run" --out "$out" || status=1

echo "== CPU training step against PyTorch CPU eager (this machine's cores)"
gunzip -c "$check/bench/megc-run-cpu.gz" >"$build/megc-run-cpu" &&
  chmod +x "$build/megc-run-cpu" &&
  within 240 python3 bench/cpu_train_bench.py --megc-run "$build/megc-run-cpu" || status=1
echo "gpu check exit status $status"
exit $status
