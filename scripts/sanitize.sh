#!/usr/bin/env bash
# The runtime under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# megrt alone (cmake -S runtime) with clang, without the CUDA backend (nvcc
# takes no clang this new, and its code needs a GPU to run) and with
# OpenBLAS as the CPU BLAS (the main build uses oneDNN: both paths run the
# suite), runs its GoogleTest suite
# (multi-rank tests included) with leak checking on, Open MPI's own leaks
# suppressed by runtime/test/lsan.supp, then runs each libFuzzer target
# (runtime/fuzz) for MEGC_FUZZ_SECONDS (default 20) from seeds it makes:
# small npy and safetensors files, and artifacts the main build's megc
# compiles when it exists. Any sanitizer report or fuzzer finding fails.
set -euo pipefail
start=$SECONDS
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}
san=${MEGC_SANITIZE_DIR:-$build-sanitize}
seconds=${MEGC_FUZZ_SECONDS:-20}
clang=/usr/lib/llvm-22/bin/clang
if [ ! -x "$clang" ]; then
  echo "sanitize: $clang not found (scripts/setup.sh installs clang-22)" >&2
  exit 1
fi

flags="-fsanitize=address,undefined -fno-sanitize-recover=all"
flags+=" -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
export CCACHE_BASEDIR=$root
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -G Ninja -S "$root/runtime" -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$clang" -DCMAKE_CXX_COMPILER="$clang++" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DMEGRT_CUDA=OFF -DMEGRT_CPU_BLAS=OPENBLAS -DMEGRT_BUILD_FUZZERS=ON \
  "${launcher[@]}" >/dev/null
cmake --build "$san"

# The slow unwinder, so that leaks allocated inside libc (vasprintf for
# Open MPI) show the frames that the suppressions name.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS=suppressions=$root/runtime/test/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== sanitized runtime tests =="
status=0
ctest --test-dir "$san" --output-on-failure -LE mpi || status=1
# Open MPI unloads its components at MPI_Finalize, after which their frames
# have no names for the suppressions: the MPI tests keep them loaded.
"$clang" -shared -fPIC -O2 "$root/runtime/test/KeepLibrariesLoaded.c" \
  -o "$san/libkeep-libraries-loaded.so"
LD_PRELOAD=$san/libkeep-libraries-loaded.so \
  ctest --test-dir "$san" --output-on-failure -L mpi || status=1

echo "== fuzzers ($seconds s each) =="
seeds=$san/fuzz-seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{npy,safetensors,artifact}
/usr/bin/python3 - "$seeds" <<'PY'
import json, struct, sys
import numpy as np
seeds = sys.argv[1]
arrays = [np.arange(6, dtype=np.float32).reshape(2, 3),
          np.zeros((2, 16), np.int32), np.ones(4, np.float16),
          np.arange(3, dtype=np.int64), np.array(7, np.uint16)]
for i, a in enumerate(arrays):
    np.save(f"{seeds}/npy/{i}.npy", a)
    data = a.tobytes()
    kind = {"float32": "F32", "int32": "I32", "float16": "F16",
            "int64": "I64", "uint16": "BF16"}[a.dtype.name]
    header = {"t": {"dtype": kind, "shape": list(a.shape),
                    "data_offsets": [0, len(data)]},
              "__metadata__": {"k": "v"}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(f"{seeds}/safetensors/{i}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
PY
if [ -x "$build/bin/megc" ]; then
  "$build/bin/megc" gen llama --layers 1 --hidden 32 --heads 2 --ffn 64 \
    --vocab 64 --seq 4 --batch 1 --train -o "$seeds/llama.mlir"
  "$build/bin/megc" "$seeds/llama.mlir" -o "$seeds/artifact/llama.megc"
fi
mkdir -p "$san/fuzz-findings"
for target in npy safetensors artifact; do
  corpus=$san/fuzz-corpus/$target
  log=$san/fuzz-$target.log
  mkdir -p "$corpus"
  # Inputs that once found a bug (runtime/fuzz/regressions) start each run.
  regressions=()
  [ -d "$root/runtime/fuzz/regressions/$target" ] &&
    regressions=("$root/runtime/fuzz/regressions/$target")
  if (cd "$san/fuzz-findings" &&
      "$san/fuzz/megrt-fuzz-$target" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 \
        "$corpus" "$seeds/$target" "${regressions[@]}" >"$log" 2>&1); then
    runs=$(grep -m1 -oE "stat::number_of_executed_units: [0-9]+" "$log" |
           grep -oE "[0-9]+$" || echo "?")
    echo "fuzz $target: $runs inputs in $seconds s, no finding"
  else
    echo "fuzz $target: FINDING (input in $san/fuzz-findings):"
    tail -n 40 "$log"
    status=1
  fi
done
echo "sanitize: done in $((SECONDS - start)) s"
exit $status
