#!/bin/bash
# bench/train/run_profile.sh — one GPU call to see where a FLUX.1-dev-width step
# goes: attention tests + bench with the cuDNN path (bench/ops/run_gpu.sh attn),
# then ORAKUL_PROFILE=1 training of FLUX.1-dev blocks (4 double + 8 single, the
# per-block costs of the full model) at 1024², rank 128, with our attention and
# with cuDNN's, then the streaming bench. Logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
OPS_QUICK=1 timeout 240 bash bench/ops/run_gpu.sh attn > "$OUT/ops.txt" 2>&1; echo "== ops rc=$?"; grep -E "test_sdpa|asserts|attn|cudnn:" "$OUT/ops.txt" | head -20
cd "$root"
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ds=/tmp/ork-bench/ds; mkdir -p $ds
python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize((1024,1024), Image.BICUBIC).save('$ds/astronaut.png')"
sed -e "s#@RANK@#128#g" -e "s#@OUT@#/tmp/ork-prof#" -e "s#@DS@#$ds#" -e "s#@STEPS@#${STEPS:-4}#" -e "s#@BUDGET@#0#" \
    -e "s#@TAEF1@#$root/.carry/taef1#" -e "s#context_len: 512#context_len: 512, depth: 4, depth_single_blocks: 8#" \
    bench/train/flux1_dev_1024.yaml.in > /tmp/prof.yaml
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
for mode in ours cudnn; do
  rm -rf /tmp/ork-prof
  if [ $mode = cudnn ]; then export ORK_CUDNN_SDPA=1 ORK_CUDNN_LIB=$whl/libcudnn.so.9; else export ORK_CUDNN_SDPA=0; fi
  t0=$(date +%s); ORAKUL_PROFILE=1 timeout 150 $B/bin/orakul run /tmp/prof.yaml > "$OUT/prof_$mode.log" 2>&1
  echo "== profile ($mode attention) rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "^step|error|cudnn|cuDNN" "$OUT/prof_$mode.log" | head -8
  sed -n '/^profile/,$p' "$OUT/prof_$mode.log" | head -30
  rm -rf /tmp/ork-prof; t0=$(date +%s); timeout 150 $B/bin/orakul run /tmp/prof.yaml > "$OUT/plain_$mode.log" 2>&1
  echo "== unprofiled ($mode) rc=$?"; grep -E "^step" "$OUT/plain_$mode.log" | tail -3
done
t0=$(date +%s); timeout 120 $B/bench/stream/bench_stream 3 24 16 12 > "$OUT/stream.txt" 2>&1; echo "== bench_stream rc=$? in $(( $(date +%s) - t0 )) s"; tail -15 "$OUT/stream.txt"
