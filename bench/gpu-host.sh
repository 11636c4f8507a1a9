#!/usr/bin/env bash
# zerocompile next to torch.compile on a GPU host that has no package registry.
#
#   bench/gpu-host.sh prepare                 here (Debian 12, with its archive): downloads the
#                                             Debian packages the host lacks into .gpu-deps/
#   bench/gpu-host.sh run OUT_DIR [STEP...]   on the host: every step below, or those named
#     build        unpacks the packages into a private prefix and builds zc with the CUDA backend
#                  (the host's compiler and /usr/local/cuda) into build-gpu/
#     zc           zc env, and zc bench (CPU rows, and CUDA rows when there is a GPU)
#     torch-cuda   bench/torch_compile.py on cuda: seed64 and gpt12 (f32 and bf16), in mode
#                  default and then reduce-overhead (CUDA graphs)
#     torch-cpu    bench/torch_compile.py on the CPU: seed64 whole and regional by hand
#     zc-train     zc bench --only train --device cuda: a training step of seed64 and gpt12
#     torch-train  bench/torch_compile.py --train on cuda: the same step under torch.compile
#     ratios       bench/ratios.py over what the steps above wrote
#     dynamic      dynamic shapes: the 12-layer GPT (d 768, 12 heads, batch 4) called at 8
#                  lengths on cuda, automatic / marked / static, zc three times (bench/zc_dynamic.py over
#                  tests/tools/dynamic_lengths) and torch.compile (bench/torch_dynamic.py), each
#                  mode in a fresh process with an empty cache: dynamic-zc.jsonl,
#                  dynamic-torch.jsonl, dynamic.txt (the two side by side)
#     warm         the spread of warm first calls: gpt12 inference and training and seed64
#                  training, six fresh processes each on one warm cache, then six with glibc's
#                  heap trim off (warm.txt: ready and first call in ms per process)
#     profile      where a gpt12 training step's time goes: zc's warm first step with
#                  ZC_LOGS=timing (profile-zc-warm.log) and sampled on its main thread
#                  (profile-zc-warm-sampled.txt, bench/wall_sampler.c), zc's kernels with
#                  ZC_LOGS=kernels (profile-zc-kernels.log, over 54 steps) and torch.compile's under
#                  torch.profiler (profile-torch.log, 5 steps); cuBLASLt's algorithms against
#                  torch on each f32 product of the step (profile-gemm-*.jsonl)
#     cpu-gemm     the host CPU's GEMM libraries: OpenBLAS (as it detects the CPU, and told the
#                  SkylakeX core) against oneDNN on the models' products at 1..16 threads
#                  (cpu-gemm*.json, bench/cpu_gemm.cpp)
#     cpu-conv     ResNet-50's convolutions through oneDNN at batch 1 in three layouts ([N, C, H, W],
#                  channels-last, oneDNN's blocked) at 1..16 threads (cpu-conv.json, bench/cpu_conv.cpp)
#     cpu          the host CPU's speed: zc's gpt-small and seed64 per call, compiled and eager,
#                  at 1..16 threads, gpt-small called from 1, 4 and 16 threads at once, the
#                  12-layer d=768 GPT at all threads, both GPTs with MatmulPrecision::Bf16
#                  (cpu-steady.txt);
#                  torch.compile's gpt_small and gpt12 on the CPU (torch-cpu-gpt-small.jsonl)
#     cpu-gpt      issue 17's comparison on the host CPU, nothing else running: gpt-small and the
#                  12-layer d=768 GPT per call (ZC_CPU_GPT_MODELS=gpt-small,gpt12 picks), zc
#                  untuned and with max_autotune's choices (packed weights among them), three
#                  processes each before torch.compile's cold, warm and Mega-Cache processes
#                  (ZC_TORCH_SCENARIOS=cold,warm picks) and three after (cpu-gpt.txt,
#                  torch-cpu-gpt.jsonl)
#     cpu-attention  causal attention on the host CPU: zc's one kernel against the same
#                  decomposed (bench/codegen BM_Attention: cpu-attention.json) and torch's
#                  scaled_dot_product_attention (bench/torch_attention.py: torch-cpu-attention.jsonl)
#     autotune     Mode::MaxAutotune on the host CPU: gpt-small and the 12-layer d=768 GPT cold
#                  without and with tuning, warm with it, per call tuned against untuned
#                  (`zc bench --device cpu --only autotune`: zc-autotune.json, autotune.txt)
#     onnx         ONNX import on the host CPU: the tests' torch exports (ResNet-18 at 1/8 width,
#                  a tiny GPT-2: tests/tools/export_torch_models.py, into OUT_DIR/models) and
#                  torchvision's ResNet-50 at batch 1, 224x224, zc cold / warm / per call against
#                  ONNX Runtime's session creation and per call (bench/onnx_vs_ort.py: onnx.txt,
#                  onnx-resnet50.json)
#     resnet-cuda  torchvision's ResNet-152 on the GPU, batch 32, 128x128: zc (the torch export
#                  through `zc run --device cuda`) cold, warm and per call, and with
#                  ZC_CUDA_CONV=cudnn, against torch.compile cold and warm (bench/torch_resnet.py;
#                  its default TF32 convolutions) and without TF32, in the same run
#                  (resnet-cuda.txt)
#   ZC_BENCH_DEVICE=cuda (or cpu) limits the zc step to those rows (default all).
#   Steps after `build` use the build-gpu/ it left, so a run can be split over several commands
#   (each step takes a few minutes; torch's CPU cold compiles most).
#
# OUT_DIR receives every log and figure: configure.log, build.log, nvidia-smi.txt, zc-env.txt,
# zc-bench.json/.txt, zc-bench-train.json/.txt, torch-cuda-default.jsonl,
# torch-cuda-reduce-overhead.jsonl, torch-cpu.jsonl, torch-train.jsonl (each with a .log of its
# progress and errors) and ratios.txt.
#
# Dependencies travel as Debian packages (scripts/gpu-host-env.sh unpacks them): OpenBLAS's
# OpenMP build (and libgfortran, which it needs), the zstd, OpenSSL and hiredis headers and
# libraries, redis-server for the remote and fleet scenarios (a private server on 127.0.0.1, as
# on the development machine), GoogleTest and Google Benchmark for scripts/gpu-test.sh, and
# oneDNN (with the OpenCL loader its library links) for the cpu step's GEMM comparison, and
# ONNX's protobuf classes with protobuf for ONNX import.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
deps="$root/.gpu-deps"
packages=(libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libzstd-dev libssl-dev libssl3
          libhiredis-dev libhiredis0.14 redis-server redis-tools libjemalloc2 liblzf1
          libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
          libdnnl-dev libdnnl2 ocl-icd-libopencl1
          libonnx-dev libonnx1 libonnxifi libprotobuf-dev libprotobuf32)

case "${1:-}" in
  prepare)
    mkdir -p "$deps"
    (cd "$deps" && apt-get download "${packages[@]}")
    ls -l "$deps"
    ;;
  run)
    out="${2:?usage: $0 run OUT_DIR [build|zc|torch-cuda|torch-cpu|zc-train|torch-train|profile|warm|dynamic|cpu-gemm|cpu|cpu-gpt|autotune|ratios ...]}"
    shift 2
    steps=("$@")
    [[ ${#steps[@]} -gt 0 ]] || steps=(build zc torch-cuda torch-cpu zc-train torch-train ratios)
    mkdir -p "$out"
    out="$(cd "$out" && pwd)"
    source "$root/scripts/gpu-host-env.sh"
    torch_compile() {  # NAME ARGS...: one torch_compile.py run; a failure is reported, not fatal
      local name="$1"
      shift
      # Its rows go to stdout as each scenario ends: a run cut short keeps those it finished.
      python3 "$root/bench/torch_compile.py" "$@" >"$out/$name.jsonl" 2>"$out/$name.log" || {
        echo "torch_compile.py $* did not complete (exit $?); the end of $out/$name.log:"
        tail -5 "$out/$name.log"
      }
    }
    for step in "${steps[@]}"; do
      echo "== $step"
      case "$step" in
        build)
          rm -rf build-gpu  # a fresh configure: pkg-config results are cached
          cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DZC_BUILD_TESTS=OFF \
            -DZC_BUILD_BENCH=OFF -DZC_BUILD_EXAMPLES=OFF "${zc_gpu_cmake_args[@]}" \
            >"$out/configure.log" 2>&1
          grep "zc:" "$out/configure.log" || true
          if ! grep -q "zc: CUDA backend on" "$out/configure.log"; then
            echo "zc was configured without its CUDA backend (see $out/configure.log); install" \
              "the CUDA toolkit or point CUDA_HOME at it" >&2
            exit 1
          fi
          cmake --build build-gpu --target zc_cli >"$out/build.log" 2>&1 ||
            { tail -50 "$out/build.log"; exit 1; }
          ;;
        zc)
          { nvidia-smi || true; } >"$out/nvidia-smi.txt" 2>&1
          build-gpu/zc env | tee "$out/zc-env.txt"
          # Its progress (stderr) goes to a log; what it says besides is shown after the table.
          # A failed CUDA scenario costs its own rows: the torch steps still run.
          build-gpu/zc bench --repeats 3 --device "${ZC_BENCH_DEVICE:-all}" --json "$out/zc-bench.json" 2>"$out/zc-bench.log" |
            tee "$out/zc-bench.txt" || echo "zc bench exited with an error (see below)"
          tr '\r' '\n' <"$out/zc-bench.log" | sed 's/\x1b\[K//g' | grep -v -e measuring -e '^ *$' ||
            true
          ;;
        torch-cuda)
          for mode in default reduce-overhead; do
            torch_compile "torch-cuda-$mode" --device cuda --models seed64,gpt12 --mode "$mode"
          done
          ;;
        torch-cpu)
          torch_compile torch-cpu --device cpu --models seed64,seed64_regional
          ;;
        zc-train)
          build-gpu/zc bench --only train --repeats 3 --device cuda \
            --json "$out/zc-bench-train.json" 2>"$out/zc-bench-train.log" |
            tee "$out/zc-bench-train.txt" || echo "zc bench --only train exited with an error"
          tr '\r' '\n' <"$out/zc-bench-train.log" | sed 's/\x1b\[K//g' |
            grep -v -e measuring -e '^ *$' || true
          ;;
        torch-train)
          torch_compile torch-train --train --device cuda --models seed64,gpt12 --dtypes f32
          ;;
        profile)
          cache="$(mktemp -d)"
          gpt12=(bench --child --train 1 --model gpt-blocks --layers 12 --device cuda)
          ZC_CACHE_DIR="$cache" build-gpu/zc "${gpt12[@]}" >/dev/null
          ZC_CACHE_DIR="$cache" ZC_LOGS=timing build-gpu/zc "${gpt12[@]}" \
            >"$out/profile-zc-warm.txt" 2>"$out/profile-zc-warm.log" || tail -5 "$out/profile-zc-warm.log"
          # Where that first step's wall time goes on the main thread (bench/wall_sampler.c),
          # from its capture to the process's end.
          gcc -O2 -shared -fPIC -o "$cache/libwall_sampler.so" "$root/bench/wall_sampler.c" -lrt &&
            SAMPLER_OUT="$cache/samples.txt" LD_PRELOAD="$cache/libwall_sampler.so" \
              ZC_CACHE_DIR="$cache" ZC_LOGS=timing build-gpu/zc "${gpt12[@]}" \
              >/dev/null 2>"$cache/sampled.log" &&
            python3 "$root/bench/wall_sampler.py" "$cache/samples.txt" \
              "$(grep -m1 'capture' "$cache/sampled.log" | sed 's/.*\[\([0-9.]*\) ms\].*/\1/')" \
              1e9 >"$out/profile-zc-warm-sampled.txt" 2>&1 || true
          ZC_CACHE_DIR="$cache" ZC_LOGS=kernels build-gpu/zc "${gpt12[@]}" --steady 1 \
            >"$out/profile-zc-kernels.txt" 2>"$out/profile-zc-kernels.log" ||
            tail -5 "$out/profile-zc-kernels.log"
          rm -rf "$cache"
          grep -A45 "kernel times" "$out/profile-zc-kernels.log" || true
          grep "by kind" "$out/profile-zc-kernels.log" || true
          # cuBLASLt's heuristic choice against its other candidates, and torch, per product.
          cmake -S . -B build-gpu -DZC_BUILD_BENCH=ON >>"$out/configure.log" 2>&1
          cmake --build build-gpu --target bench_cuda_gemm_algos >>"$out/build.log" 2>&1 &&
            build-gpu/bench/cuda_gemm_algos | tee "$out/profile-gemm-zc.jsonl" || true
          python3 bench/torch_gemm.py | tee "$out/profile-gemm-torch.jsonl" || true
          torch_compile profile-torch --train --profile --device cuda --models gpt12 --dtypes f32
          grep -B2 -A50 "torch.profiler" "$out/profile-torch.log" | tail -60 || true
          ;;
        warm)
          # The warm first call's spread: six fresh processes per model on one warm cache
          # (ready and first call, ms, as zc bench --child prints them), then six with glibc's
          # heap trim off (docs/adr/0013 says why that matters).
          cache="$(mktemp -d)"
          for model in "gpt-blocks --layers 12 --train 0" "gpt-blocks --layers 12 --train 1" \
            "seed --layers 64 --train 1"; do
            child=(bench --child --model $model --device cuda)
            ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" >/dev/null
            for i in 1 2 3 4 5 6; do
              echo "$model: $(ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" | cut -d' ' -f1-2)"
            done
            for i in 1 2 3 4 5 6; do
              echo "$model, trim off: $(GLIBC_TUNABLES=glibc.malloc.trim_threshold=1000000000 \
                ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" | cut -d' ' -f1-2)"
            done
          done | tee "$out/warm.txt"
          rm -rf "$cache"
          ;;
        dynamic)
          cmake -S . -B build-gpu -DZC_BUILD_TESTS=ON >>"$out/configure.log" 2>&1
          cmake --build build-gpu --target test_tool_dynamic_lengths >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          gpt12=(--device cuda --layers 12 --d-model 768 --heads 12 --batch 4 --steady 20)
          python3 bench/zc_dynamic.py --tool build-gpu/tests/tools/dynamic_lengths --runs 3 "${gpt12[@]}" \
            >"$out/dynamic-zc.jsonl" || echo "zc_dynamic.py reported an error (see the table)"
          python3 bench/torch_dynamic.py "${gpt12[@]}" >"$out/dynamic-torch.jsonl" 2>"$out/dynamic-torch.log" ||
            { echo "torch_dynamic.py did not complete:"; tail -5 "$out/dynamic-torch.log"; }
          python3 bench/zc_dynamic.py --table "$out/dynamic-zc.jsonl" "$out/dynamic-torch.jsonl" |
            tee "$out/dynamic.txt"
          ;;
        onnx)
          python3 tests/tools/export_torch_models.py "$out/models" --resnet50 /tmp/resnet50.onnx \
            >"$out/onnx-export.log" 2>&1 || tail -20 "$out/onnx-export.log"
          python3 bench/onnx_vs_ort.py --zc build-gpu/zc --model /tmp/resnet50.onnx \
            --processes 3 --repeats 30 --json "$out/onnx-resnet50.json" | tee "$out/onnx.txt" ||
            echo "onnx_vs_ort.py did not complete"
          ;;
        resnet-cuda)
          python3 bench/torch_resnet.py export /tmp/resnet152.onnx 2>"$out/resnet-cuda.log"
          cache="$(mktemp -d)"
          for run in cold warm; do
            echo "zc $run: $(ZC_CACHE_DIR="$cache" build-gpu/zc run /tmp/resnet152.onnx \
              --device cuda --dim batch=32 --repeats 50 --json - | tail -1)"
          done | tee "$out/resnet-cuda.txt"
          # The convolutions through cuDNN (ZC_CUDA_CONV=cudnn) instead of columns and cuBLASLt.
          echo "zc cudnn cold: $(ZC_CUDA_CONV=cudnn ZC_CACHE_DIR="$cache/cudnn" \
            build-gpu/zc run /tmp/resnet152.onnx --device cuda --dim batch=32 --repeats 50 \
            --json - | tail -1)" | tee -a "$out/resnet-cuda.txt"
          # At torch's default precision for convolutions: MatmulPrecision::Tf32 (warm: the
          # code is the default's).
          echo "zc tf32 warm: $(ZC_CACHE_DIR="$cache" build-gpu/zc run /tmp/resnet152.onnx \
            --device cuda --dim batch=32 --repeats 50 --matmul-precision tf32 --json - |
            tail -1)" | tee -a "$out/resnet-cuda.txt"
          echo "zc cudnn tf32 warm: $(ZC_CUDA_CONV=cudnn ZC_CACHE_DIR="$cache/cudnn" \
            build-gpu/zc run /tmp/resnet152.onnx --device cuda --dim batch=32 --repeats 50 \
            --matmul-precision tf32 --json - | tail -1)" | tee -a "$out/resnet-cuda.txt"
          for run in cold warm; do
            echo "torch.compile $run: $(TORCHINDUCTOR_CACHE_DIR="$cache/inductor" \
              python3 bench/torch_resnet.py compile 2>>"$out/resnet-cuda.log")"
          done | tee -a "$out/resnet-cuda.txt"
          # At zc's precision: torch's default computes f32 convolutions in TF32.
          echo "torch.compile no-tf32 warm: $(TORCHINDUCTOR_CACHE_DIR="$cache/inductor" \
            python3 bench/torch_resnet.py compile --no-tf32 2>>"$out/resnet-cuda.log")" |
            tee -a "$out/resnet-cuda.txt"
          rm -rf "$cache"
          ;;
        cpu-conv)
          cmake -S . -B build-gpu -DZC_BUILD_BENCH=ON >>"$out/configure.log" 2>&1
          cmake --build build-gpu --target bench_cpu_conv >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          build-gpu/bench/cpu_conv --benchmark_min_time=0.3 --benchmark_format=json \
            >"$out/cpu-conv.json" 2>"$out/cpu-conv.log" || tail -5 "$out/cpu-conv.log"
          ;;
        cpu-gemm)
          cmake -S . -B build-gpu -DZC_BUILD_BENCH=ON >>"$out/configure.log" 2>&1
          cmake --build build-gpu --target bench_cpu_gemm >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          gemm=(build-gpu/bench/cpu_gemm --benchmark_min_time=0.1 --benchmark_format=json)
          "${gemm[@]}" >"$out/cpu-gemm.json" 2>"$out/cpu-gemm.log" || tail -5 "$out/cpu-gemm.log"
          OPENBLAS_CORETYPE=SkylakeX "${gemm[@]}" --benchmark_filter=openblas \
            >"$out/cpu-gemm-skylakex.json" 2>>"$out/cpu-gemm.log" || tail -5 "$out/cpu-gemm.log"
          ;;
        cpu)
          cmake --build build-gpu --target zc_cli >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          cache="$(mktemp -d)"
          for model in "gpt-small --layers 4" "seed --layers 64"; do
            for regions in auto eager; do
              for threads in 1 2 4 8 16; do
                child=(bench --child --model $model --regions $regions --steady 1)
                echo "$model $regions threads $threads: $(OMP_NUM_THREADS=$threads \
                  ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" 2>/dev/null | tail -1)"
              done
            done
          done | tee "$out/cpu-steady.txt"
          # The 12-layer d=768 GPT (input [8, 128, 768]) at the host's full thread count, and
          # four callers of one compiled gpt-small at once (CPU threads shared, not multiplied).
          for callers in 1 4 16; do
            child=(bench --child --model gpt-small --layers 4 --callers $callers)
            echo "gpt-small $(ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" 2>/dev/null | tail -1)"
          done | tee -a "$out/cpu-steady.txt"
          # Three processes compiled, as torch_compile.py below runs three (cold, warm, Mega-Cache):
          # one process of that size moves by 10-15% on this host.
          for regions in auto auto auto eager; do
            child=(bench --child --model gpt-blocks --layers 12 --device cpu --regions $regions --steady 1)
            echo "gpt12 $regions: $(ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" 2>/dev/null | tail -1)"
          done | tee -a "$out/cpu-steady.txt"
          # MatmulPrecision::Bf16 (AMX where the CPU has it): per call, and the logits' error.
          for model in "gpt-small --layers 4" "gpt-blocks --layers 12 --device cpu"; do
            child=(bench --child --model $model --matmul-precision bf16 --steady 1)
            echo "${model%% *} bf16: $(ZC_CACHE_DIR="$cache" build-gpu/zc "${child[@]}" 2>/dev/null | tr '\n' ' ')"
          done | tee -a "$out/cpu-steady.txt"
          rm -rf "$cache"
          torch_compile torch-cpu-gpt-small --device cpu --models gpt_small,gpt12 --dtypes f32
          cat "$out/torch-cpu-gpt-small.jsonl"
          ;;
        cpu-gpt)
          cmake --build build-gpu --target zc_cli >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          cache="$(mktemp -d)"
          models="${ZC_CPU_GPT_MODELS:-gpt-small,gpt12}"
          zc_rounds() {  # FIRST LAST: zc's processes, each model untuned then tuned
            for round in $(seq "$1" "$2"); do
              for model in ${models//,/ }; do
                case "$model" in
                  gpt-small) child=(bench --child --model gpt-small --layers 4 --steady 1) ;;
                  gpt12) child=(bench --child --model gpt-blocks --layers 12 --device cpu --steady 1) ;;
                  *) echo "ZC_CPU_GPT_MODELS: unknown model '$model' (gpt-small, gpt12)" >&2; exit 2 ;;
                esac
                echo "$model default $round: $(ZC_CACHE_DIR="$cache/default" build-gpu/zc \
                  "${child[@]}" 2>/dev/null | tail -1)"
                echo "$model max-autotune $round: $(ZC_CACHE_DIR="$cache/tuned" build-gpu/zc \
                  "${child[@]}" --mode max-autotune 2>/dev/null | tail -1)"
              done
            done | tee -a "$out/cpu-gpt.txt"
          }
          # Each line: ready first import per_call(us) compiles build_ms autotune_ms. The first
          # tuned process of a model times the candidates; the later ones read its choices.
          # Three rounds before torch's processes and three after, as the host drifts.
          : >"$out/cpu-gpt.txt"
          zc_rounds 1 3
          torch_compile torch-cpu-gpt --device cpu --models "${models//gpt-small/gpt_small}" \
            --dtypes f32 --scenarios "${ZC_TORCH_SCENARIOS:-cold,warm,load_mega}"
          cat "$out/torch-cpu-gpt.jsonl"
          zc_rounds 4 6
          ZC_CACHE_DIR="$cache/tuned" build-gpu/zc cache ls 2>/dev/null | grep autotune |
            tee -a "$out/cpu-gpt.txt" || true
          rm -rf "$cache"
          ;;
        cpu-attention)
          cmake -S . -B build-gpu -DZC_BUILD_BENCH=ON >>"$out/configure.log" 2>&1
          cmake --build build-gpu --target bench_codegen >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          ZC_CACHE_DIR="$(mktemp -d)" build-gpu/bench/codegen --benchmark_filter=BM_Attention \
            --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
            --benchmark_format=json >"$out/cpu-attention.json" 2>"$out/cpu-attention.log" ||
            tail -5 "$out/cpu-attention.log"
          python3 bench/torch_attention.py | tee "$out/torch-cpu-attention.jsonl"
          ;;
        autotune)
          cmake --build build-gpu --target zc_cli >>"$out/build.log" 2>&1 ||
            { tail -30 "$out/build.log"; exit 1; }
          build-gpu/zc bench --device cpu --only autotune --repeats 3 \
            --json "$out/zc-autotune.json" 2>"$out/autotune.log" | tee "$out/autotune.txt"
          ;;
        ratios)
          shopt -s nullglob
          # zc-bench*.json: also the files of `zc bench --device cpu|cuda` run apart.
          zc_files=("$out"/zc-bench*.json)
          torch_files=("$out"/torch-*.jsonl)
          if [[ ${#zc_files[@]} -eq 0 || ${#torch_files[@]} -eq 0 ]]; then
            echo "no zc-bench*.json or torch-*.jsonl in $out: run the zc and torch steps first" >&2
            exit 1
          fi
          python3 "$root/bench/ratios.py" "${zc_files[@]}" "${torch_files[@]}" |
            tee "$out/ratios.txt"
          ;;
        *)
          echo "unknown step '$step': expected build, zc, torch-cuda, torch-cpu, zc-train," \
            "torch-train, profile, warm, dynamic, cpu-gemm, cpu, cpu-gpt, cpu-attention, autotune or ratios" >&2
          exit 2
          ;;
      esac
    done
    ;;
  *)
    echo "usage: $0 prepare | run OUT_DIR [build|zc|torch-cuda|torch-cpu|zc-train|torch-train|profile|warm|dynamic|cpu-gemm|cpu|cpu-gpt|autotune|ratios ...]" >&2
    exit 2
    ;;
esac
