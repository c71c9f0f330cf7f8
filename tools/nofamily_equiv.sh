#!/bin/sh
# tools/nofamily_equiv.sh HEAD_BUILD_DIR — (re)write tests/fixtures/nofamily/,
# the "before" of issue #30 point 1 ("the same plan lines and bit-identical
# short runs before and after"), with HEAD's tests/nofamily/test_nofamily run
# in write / compare mode against the orakul of older commits built here on
# the CPU in git worktrees (the same code that compares at HEAD writes what
# the old orakul printed):
#   1. BASE (default 91156af, the parent of 48a3376, the first ABI 1.3
#      block-declaration commit: the last core that knew FLUX by name): writes
#      every fixture (plans and runs);
#   2. RUNBASE^ (RUNBASE default 0b33069, "schedule: timestep types as
#      ai-toolkit draws them", a fix that changes every training draw):
#      compared with them, plans and runs — so the declaration commits of
#      #30 before it (48a3376, 52888ea, c95e11c, ...) changed no bit;
#   3. RUNBASE: rewrites the run fixtures (the draws of ai-toolkit), which
#      HEAD's ctest compares with — so nothing after it changed a bit either
#      (the meant differences are in test_nofamily.c's meant()).
# Configs: configs/*.yaml of BASE with the dataset and output under @ROOT@
# and the hub model names as presets (no weights here), plus flux1-schnell /
# flux2-klein-4b plans and tiny FLUX.1 / FLUX.2 4-step runs from
# tests/train/configs/tiny.yaml of BASE. Then
#   ctest --test-dir HEAD_BUILD_DIR -R '^nofamily$'
# compares HEAD. Needs git, cmake, a C compiler and BASE's build dependencies;
# about 10 minutes on 2 cores. Env: NOFAMILY_BASE, NOFAMILY_RUNBASE (commits),
# NOFAMILY_WT (worktree prefix, default /tmp/nofamily-base; reused), JOBS (2).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tools/nofamily_equiv.sh HEAD_BUILD_DIR}" && pwd)
base=${NOFAMILY_BASE:-91156af}
wt=${NOFAMILY_WT:-/tmp/nofamily-base}
jobs=${JOBS:-2}

runbase=${NOFAMILY_RUNBASE:-0b33069}
targets="orakul orakul_plugin_flux orakul_plugin_mse orakul_plugin_adamw orakul_plugin_quant orakul_plugin_t5clip"
build_at() { # build_at COMMIT WORKTREE: orakul and the plugins the configs load, at COMMIT
  [ -d "$2" ] || git -C "$root" worktree add --detach "$2" "$1" >/dev/null
  git -C "$2" checkout -q --detach "$1"
  cmake -S "$2" -B "$2/build" -DORAKUL_CUDA=OFF >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$2/build" -j"$jobs" --target $targets >/dev/null
  echo "built $(git -C "$2" log -1 --format='%h %s')"
}
cmake --build "$build" -j"$jobs" --target test_nofamily >/dev/null
t=$build/tests/nofamily/test_nofamily
export ORAKUL_PLAN_DEVICE=h200

fx=$root/tests/fixtures/nofamily
mkdir -p "$fx/configs" "$fx/expected"
local_paths() {
  sed -e 's#folder_path: .*#folder_path: @ROOT@/data#' \
      -e 's#training_folder: .*#training_folder: @ROOT@/out#' \
      -e 's#name_or_path: "black-forest-labs/FLUX.1-dev"#name_or_path: preset:flux1-dev#' \
      -e 's#name_or_path: "black-forest-labs/FLUX.2-dev"#name_or_path: preset:flux2-dev#' \
      -e '/match_target_res/d'
}
for c in train_lora_flux_24gb train_lora_flux2_24gb seed_flux2_dev_r1280_24gb quickstart; do
  git -C "$root" show "$base:configs/$c.yaml" | local_paths > "$fx/configs/$c.yaml"
done
sed -e 's#preset:flux1-dev#preset:flux1-schnell#' "$fx/configs/train_lora_flux_24gb.yaml" \
  > "$fx/configs/plan_flux1_schnell.yaml"
sed -e 's#preset:flux2-dev#preset:flux2-klein-4b#' "$fx/configs/train_lora_flux2_24gb.yaml" \
  > "$fx/configs/plan_flux2_klein_4b.yaml"
tiny() { # tiny.yaml of BASE: 4 steps, float32, saved and sampled at step 4 with the model's default steps
  git -C "$root" show "$base:tests/train/configs/tiny.yaml" |
    sed -e 's#^  name: quickstart#  name: nofamily#' -e 's#@OUT@#@ROOT@/out#' -e 's#@DATA@#@ROOT@/data#' \
        -e 's#@STEPS@#4#' -e 's#@SAVE_EVERY@#4#' -e 's#@KEEP@#1#' -e 's#@ALPHA@#16#' -e 's#@DTYPE@#float32#' \
        -e 's#@OPTIMIZER@#adamw#' -e 's#@PRESET@#preset:custom#' -e 's#@WDT@#float32#' "$@" |
    sed -e '/^      logging:/i\      sample:\n        sample_every: 4\n        width: 64\n        height: 64\n        prompts:\n          - "a photo of a cat"\n          - "a cup of coffee"\n        seed: 42\n        walk_seed: true'
}
tiny > "$fx/configs/tiny_flux1.yaml"
tiny -e 's#flux_version: 1#flux_version: 2#' -e 's#vec_in_dim: 16#vec_in_dim: 0#' > "$fx/configs/tiny_flux2.yaml"

build_at "$base" "$wt"
ORK_NOFAMILY_EXE="$wt/build/bin/orakul" ORK_NOFAMILY_WRITE=1 "$t" >/dev/null
echo "1. wrote $fx from $base"
build_at "$runbase^" "$wt-runs"
log=$(mktemp)
if ! ORK_NOFAMILY_EXE="$wt-runs/build/bin/orakul" "$t" >"$log" 2>&1; then
  grep -E "Test:|FAIL|differs|base:|HEAD:|asserts" "$log"
  echo "2. $runbase^ differs from $base (above)" >&2
  exit 1
fi
rm -f "$log"
echo "2. $runbase^ gives $base's plans and runs"
build_at "$runbase" "$wt-runs"
ORK_NOFAMILY_EXE="$wt-runs/build/bin/orakul" ORK_NOFAMILY_WRITE=1 ORK_NOFAMILY_ONLY=run "$t" >/dev/null
echo "3. rewrote the run fixtures from $runbase"
