#!/bin/bash
# bench/lokr/run_gpu.sh — LoKr's CUDA path on the GPU machine, in one device command
# (under 5 minutes): configure + build with CUDA (build-gpu/, kept while warm) the LoKr
# tests and what they run, then
#   lokr_op_cuda     the linear op with a LoKr adapter on the CUDA backend against the
#                    lycoris-lora fixtures (F32 and BF16 activations; tests/lokr)
#   lokr_train_cuda  orakul run with network.type: lokr on cuda:0: the loss falls,
#                    resume bit-identical, streamed == resident, fp8 base, factor 4,
#                    the refusal
#   step (opt-in)    FLUX.1-dev size (preset, random bf16 weights, TAEF1 latents of one
#                    photo at 512²), 6 steps each of LoKr (full rank, factor -1) and LoRA
#                    rank 16: s/it and peak memory, the LoKr cost docs/DECISIONS.md "LoKr"
#                    estimates (needs .carry/taef1, as bench/train/run_gpu.sh)
# Logs in $OUT/lokr_*.log; one summary line per test on stdout.
# Usage (repo root; carry .gpu-deps [, .carry]): bash bench/lokr/run_gpu.sh [tests] [step]
set -u
phases="$*"; [ -n "$phases" ] || phases=tests
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
B=$root/build-gpu
t_end=$(( $(date +%s) + ${LOKR_GPU_BUDGET_S:-280} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
    >'$OUT/lokr_build.log' 2>&1 && cmake --build $B -j16 --target test_lokr_op_cuda test_lokr_train_cuda \
    orakul orakul_plugin_flux orakul_plugin_mse orakul_plugin_adamw \
    orakul_plugin_quant orakul_plugin_image_codecs >>'$OUT/lokr_build.log' 2>&1"
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/lokr_build.log" | head -20; tail -20 "$OUT/lokr_build.log"; exit 1; }
case " $phases " in *" tests "*) ;; *) tests_off=1;; esac
for t in $( [ -z "${tests_off:-}" ] && echo lokr_op_cuda lokr_train_cuda ); do
  t1=$(date +%s)
  (cd $B && timeout $(left) ctest -R "^$t\$" -V >"$OUT/lokr_$t.log" 2>&1)
  rc=$?
  echo "== $t rc=$rc in $(( $(date +%s) - t1 )) s"
  grep -E "rel err|loss:|FAIL|tests passed|Passed|Failed|\*\*\*" "$OUT/lokr_$t.log" | head -20
done
case " $phases " in *" step "*)
  ds=/tmp/ork-lokr-bench/ds; mkdir -p $ds
  python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize((512,512), Image.BICUBIC).save('$ds/astronaut.png')"
  echo "an astronaut" > $ds/astronaut.txt
  for net in "{type: lokr, lokr_factor: -1, lokr_full_rank: true}" "{type: lora, linear: 16, linear_alpha: 16}"; do
    rm -rf /tmp/ork-lokr-bench/out
    sed -e "s#@RANK@#16#g" -e "s#@OUT@#/tmp/ork-lokr-bench/out#" -e "s#@DS@#$ds#" -e "s#@STEPS@#6#" -e "s#@BUDGET@#0#" \
        -e "s#@TAEF1@#$root/.carry/taef1#" -e "s#resolution: \[1024\]#resolution: [512]#" \
        -e "s#network: {type: lora, linear: 16, linear_alpha: 16}#network: $net#" bench/train/flux1_dev_1024.yaml.in \
        > /tmp/lokr_step.yaml
    t1=$(date +%s); timeout $(left) $B/bin/orakul run /tmp/lokr_step.yaml >"$OUT/lokr_step.log" 2>&1
    echo "== FLUX.1-dev 512² $net rc=$? in $(( $(date +%s) - t1 )) s"
    grep -E "^step|error|peak|LoRA:|LoKr:" "$OUT/lokr_step.log" | tail -6
  done ;;
esac
