#!/usr/bin/env bash
# The CUDA check in one command (native/gpu/README.md): unpacks the archive `npm run gpu:pack` made, builds the patched
# llama.cpp and the harness with CUDA for the GPU nvidia-smi finds, runs the harness on the demo model and on the 1.5B
# shape, and writes the results to $OUT (the device machine's output folder) or ./results.
#
#   bash run.sh [--archive FILE] [--cpu] [--stage all|build|run] [--quick] [--work DIR] [--out DIR] [--jobs N]
#
# --archive  the archive to unpack (defaults to ponder-gpu.tar.gz in the current folder, or native/.build/ in a checkout
#            of the repository; without one, the folder this script is in is taken as the unpacked archive)
# --cpu      build for the CPU (GGML_CUDA off): the check of the pack itself, and how the CPU reference is made
# --stage    build only, run only (the build of an earlier call), or both (default)
# --quick    only the runs the CPU reference holds (demo model, 1.5B shape at 512 cells), not 4,096 and 16,384 cells
# --work     where to unpack and build (defaults to native/.build/gpu-work in a checkout, else ./ponder-gpu-work)
# --out      where the results go (defaults to $OUT, else ./results)
# --jobs     parallel build jobs (defaults to the machine's cores)
set -euo pipefail

archive=""
cpu=0
stage=all
quick=0
work=""
out="${OUT:-}"
jobs="$(nproc 2>/dev/null || echo 2)"
while [ $# -gt 0 ]; do
    case "$1" in
        --archive) archive="$2"; shift 2 ;;
        --cpu) cpu=1; shift ;;
        --stage) stage="$2"; shift 2 ;;
        --quick) quick=1; shift ;;
        --work) work="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 64 ;;
    esac
done
case "$stage" in all|build|run) ;; *) echo "run.sh: --stage takes all, build or run" >&2; exit 64 ;; esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "$archive" ]; then
    if [ -f ponder-gpu.tar.gz ]; then archive=ponder-gpu.tar.gz
    elif [ -f native/.build/ponder-gpu.tar.gz ]; then archive=native/.build/ponder-gpu.tar.gz
    fi
fi
if [ -z "$work" ]; then
    if [ -d native/gpu ]; then work=native/.build/gpu-work; else work=ponder-gpu-work; fi
fi
[ -n "$out" ] || out=results
mkdir -p "$work" "$out"
work="$(cd "$work" && pwd)"
out="$(cd "$out" && pwd)"
timings="$out/timings.txt"
: > "$timings"
stamp() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(stamp)" 'BEGIN { printf "%.1f", b - a }'; }

t0="$(stamp)"
if [ -n "$archive" ] && [ "$stage" != run ]; then
    rm -rf "$work/ponder-gpu/llama.cpp" "$work/ponder-gpu/harness" "$work/ponder-gpu/models"
    tar -xzf "$archive" -C "$work"
    root="$work/ponder-gpu"
elif [ -n "$archive" ] || [ -d "$work/ponder-gpu" ]; then
    root="$work/ponder-gpu"
else
    root="$here"
fi
[ -f "$root/harness/CMakeLists.txt" ] || { echo "run.sh: no harness in $root (give --archive)" >&2; exit 66; }
echo "unpack: $(took "$t0") s" | tee -a "$timings"

build="$work/build-$([ "$cpu" = 1 ] && echo cpu || echo cuda)"
{
    echo "date: $(date -u)"; uname -a; echo "cores: $(nproc)"
    cmake --version | head -1
    if [ "$cpu" = 0 ]; then nvidia-smi || true; nvcc --version || true; fi
    cat "$root/PACK.txt" 2>/dev/null || true
} > "$out/env.txt" 2>&1

if [ "$stage" != run ]; then
    flags=(-DCMAKE_BUILD_TYPE=Release)
    if [ "$cpu" = 1 ]; then
        flags+=(-DGGML_CUDA=OFF)
    else
        # the architecture of the GPU in the machine (compute capability 9.0 -> 90), else nvcc's `native`
        cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)"
        [ -n "$cap" ] || cap=native
        flags+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cap")
        echo "CUDA architecture: $cap" | tee -a "$timings"
    fi
    t0="$(stamp)"
    cmake -S "$root/harness" -B "$build" "${flags[@]}" > "$out/configure.log" 2>&1 \
        || { tail -40 "$out/configure.log"; exit 1; }
    echo "configure: $(took "$t0") s" | tee -a "$timings"
    t0="$(stamp)"
    cmake --build "$build" --target ponder-gpu-harness -j "$jobs" > "$out/build.log" 2>&1 \
        || { tail -60 "$out/build.log"; exit 1; }
    echo "build (-j $jobs): $(took "$t0") s" | tee -a "$timings"
fi
[ "$stage" != build ] || exit 0

harness="$build/bin/ponder-gpu-harness"
[ -x "$harness" ] || harness="$build/ponder-gpu-harness"
[ -x "$harness" ] || { echo "run.sh: the harness is not built in $build (run --stage build first)" >&2; exit 1; }
results="$out/results.tsv"
rm -f "$results"
reference=()
[ -s "$root/cpu-reference.tsv" ] && reference=(--reference "$root/cpu-reference.tsv")
# on a CPU build one thread: ggml's threads spin at every barrier, and a shared machine deschedules them
[ "$cpu" = 1 ] && reference+=(--threads 1)
status=0
harness_run() {
    local t0 rc=0
    t0="$(stamp)"
    "$harness" --results "$results" "${reference[@]}" "$@" 2>&1 | tee -a "$out/harness.log" || rc=$?
    echo "harness $*: $(took "$t0") s, exit $rc" | tee -a "$timings"
    # 2: tokens differ from the reference (reported in the table); anything else is a failure
    if [ "$rc" = 2 ] && [ "$status" = 0 ]; then status=2; elif [ "$rc" != 0 ] && [ "$rc" != 2 ]; then status=1; fi
}
: > "$out/harness.log"
models="$root/models"
harness_run --model "$models/ponder-demo.gguf" --name ponder-demo --gates "$models/ponder-demo.retention.gguf" \
    --prompt-tokens 64 --tokens 256 --budget 128
if [ -f "$models/bench-1.5b-shape.gguf" ]; then
    shape=(--model "$models/bench-1.5b-shape.gguf" --name bench-1.5b-shape --gates "$models/bench-1.5b-shape.retention.gguf")
    harness_run "${shape[@]}" --cells 512 --prompt-tokens 448 --tokens 32 --budget 256 --prune-every 16
    if [ "$quick" = 0 ]; then
        harness_run "${shape[@]}" --cells 4096 --prompt-tokens 3840 --tokens 256 --budget 2048 --prune-every 32
        harness_run "${shape[@]}" --cells 16384 --prompt-tokens 16128 --tokens 256 --budget 2048 --prune-every 32
    fi
else
    echo "no 1.5B shape in the archive (native/gpu/README.md, \"The 1.5B shape\")" | tee -a "$timings"
fi
echo "results: $results (exit $status: 0 all tokens as the CPU reference, 2 some differ, 1 a run failed)"
exit "$status"
