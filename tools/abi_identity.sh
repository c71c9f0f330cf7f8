#!/usr/bin/env bash
# tools/abi_identity.sh — issue #30's identity check on the CPU: the model ABI's
# declarations (prediction, schedule, blocks, LoRA targets) must not change
# what orakul does with FLUX. Builds two commits (CPU only, RelWithDebInfo) in
# /tmp/ork-ident/<sha>/ from `git archive`, then compares
#   1. `orakul plan` of every config in configs/ and of the plan tests' seed
#      variants, with ORAKUL_PLAN_DEVICE unset, rtx4090 and h200: byte-identical
#      stdout + stderr (paths of the two trees rewritten to one);
#   2. short CPU training runs (the quickstart and a tiny FLUX.2 config, 5
#      steps each, one sample at the end): every LoRA file and sample PNG
#      byte-identical (cmp).
# Usage: tools/abi_identity.sh BASE [HEAD]          (default HEAD: HEAD)
#        tools/abi_identity.sh --mine "C1 C2 .." [HEAD]
# --mine: the base is HEAD with the listed commits reverted (git revert in a
# shared clone), so commits others made in between are on both sides.
# Owns /tmp/ork-ident only; builds are kept (rerun: only what changed rebuilds).
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
root=/tmp/ork-ident
mkdir -p "$root"
mine=""
if [ "${1:-}" = "--mine" ]; then mine=$2; shift 2; else base=$(git -C "$repo" rev-parse "${1:?usage: abi_identity.sh BASE [HEAD]}"); shift; fi
head=$(git -C "$repo" rev-parse "${1:-HEAD}")
if [ -n "$mine" ]; then # HEAD less the listed commits, newest first
    rm -rf "$root/revert-clone"
    git clone -q --shared --no-checkout "$repo" "$root/revert-clone"
    git -C "$root/revert-clone" checkout -q "$head"
    for c in $(git -C "$repo" rev-list --no-walk=sorted $mine); do
        git -C "$root/revert-clone" -c user.name=ident -c user.email=ident@localhost revert --no-edit "$c" >/dev/null
    done
    base=$(git -C "$root/revert-clone" rev-parse HEAD)
fi
src_repo() { # the repository that holds commit $1
    if git -C "$repo" cat-file -e "$1^{commit}" 2>/dev/null; then echo "$repo"; else echo "$root/revert-clone"; fi
}

tree_of() { git -C "$(src_repo "$1")" rev-parse "$1^{tree}"; }
dir_of() { realpath -m "$root/$(tree_of "$1")"; } # (a link to an older build of the same tree is followed)
build() { # sha -> $root/<its tree>/{src,build}: a tree already built is reused
    local d
    d=$(dir_of "$1")
    if [ ! -f "$d/src/CMakeLists.txt" ]; then
        mkdir -p "$d/src"
        git -C "$(src_repo "$1")" archive "$1" | tar -x -C "$d/src"
    fi
    cmake -S "$d/src" -B "$d/build" -DORAKUL_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$d/build" -j2 >/dev/null
}
build "$base"
build "$head"
echo "base $base, head $head"

work="$root/run"
rm -rf "$work"
mkdir -p "$work"
# Every config in configs/ with its dataset at assets/photos and Hugging Face
# names as presets (no checkpoints here), the other FLUX variants, and the
# seed variants test_plan_seed.c plans (bf16 LoRA, 1024²).
# Every plan and run reads a fresh copy of assets/photos at $work/photos
# (runs write their latent and text caches beside the images).
photos() { rm -rf "$work/photos" && cp -r "$repo/assets/photos" "$work/photos"; }
fix() { sed -e "s#folder_path: .*#folder_path: $work/photos#" \
            -e 's#name_or_path: "black-forest-labs/FLUX.1-dev"#name_or_path: preset:flux1-dev#' \
            -e 's#name_or_path: "black-forest-labs/FLUX.2-dev"#name_or_path: preset:flux2-dev#' \
            -e '/match_target_res/d' "$1"; } # (a key orakul does not know: the example's plan stops there)
for c in "$repo"/configs/*.yaml; do fix "$c" >"$work/$(basename "$c")"; done
sed 's/preset:flux1-dev/preset:flux1-schnell/' "$work/train_lora_flux_24gb.yaml" >"$work/v_schnell.yaml"
sed 's/preset:flux2-dev/preset:flux2-klein-4b/' "$work/train_lora_flux2_24gb.yaml" >"$work/v_klein4b.yaml"
sed 's/preset:flux2-dev/preset:flux2-klein-9b/' "$work/train_lora_flux2_24gb.yaml" >"$work/v_klein9b.yaml"
# the distilled variants' default sampling steps: sample_steps not given
sed '/sample_steps/d' "$work/v_schnell.yaml" >"$work/v_schnell_steps.yaml"
sed '/sample_steps/d' "$work/v_klein4b.yaml" >"$work/v_klein4b_steps.yaml"
sed 's/linear_alpha: 64}/linear_alpha: 64, weight_dtype: bf16}/' "$work/seed_flux2_dev_r1280_24gb.yaml" >"$work/seed_bf16.yaml"
sed 's/resolution: \[512\]/resolution: [1024]/' "$work/seed_bf16.yaml" >"$work/seed_1024.yaml"
# A tiny FLUX.2 (custom preset, flux_version 2) for the training runs.
sed -e 's/flux_version: 1/flux_version: 2/' -e '/vec_in_dim/d' -e 's/name: quickstart/name: tiny2/' \
    "$work/quickstart.yaml" >"$work/tiny2.yaml"
# The one wording the core changed on purpose: the sampler line named FLUX's
# shift rules; it now names the rule (plugin/model_decl.h).
words() { sed -i -e 's/(FLUX\.1 time shift)/(resolution time shift)/' \
                 -e 's/(FLUX\.2 time shift)/(resolution and steps time shift)/' "$1"; }

cfgs=("$work"/*.yaml)
fail=0
for dev in "" rtx4090 h200; do
    for c in "${cfgs[@]}"; do
        for sha in "$base" "$head"; do
            o="$work/plan-$sha-${dev:-none}-$(basename "$c" .yaml).txt"
            photos
            (cd "$repo" && ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_PLAN_DEVICE="$dev" \
                "$(dir_of "$sha")/build/bin/orakul" plan "$c" >"$o" 2>&1) || echo "exit $?" >>"$o"
            sed -i "s#$(dir_of "$sha")#TREE#g" "$o"
            [ "$sha" = "$base" ] && words "$o"
        done
        a="$work/plan-$base-${dev:-none}-$(basename "$c" .yaml).txt"
        b="$work/plan-$head-${dev:-none}-$(basename "$c" .yaml).txt"
        if cmp -s "$a" "$b"; then echo "plan same    ${dev:-(no device)} $(basename "$c") ($(wc -l <"$a") lines)"
        else echo "plan DIFFERS ${dev:-(no device)} $(basename "$c")"; diff "$a" "$b" | head -20 || true; fail=1; fi
    done
done

# Training: 5 steps, a save and a sample at step 5, on the CPU.
for c in "$work/quickstart.yaml" "$work/tiny2.yaml"; do
    n=$(basename "$c" .yaml)
    for sha in "$base" "$head"; do
        d="$work/train-$sha-$n"
        mkdir -p "$d"
        photos
        sed -e "s#training_folder: .*#training_folder: $d#" \
            -e 's/steps: 300/steps: 5/' -e 's/save_every: 100/save_every: 5/' -e 's/sample_every: 300/sample_every: 5/' \
            "$c" >"$d/job.yaml"
        (cd "$repo" && "$(dir_of "$sha")/build/bin/orakul" run "$d/job.yaml" >"$d/log.txt" 2>&1) || { echo "run failed: $d/log.txt"; fail=1; }
    done
    a="$work/train-$base-$n"
    b="$work/train-$head-$n"
    files=$(cd "$a" && find . -name '*.safetensors' -o -name '*.png' | sort)
    [ -n "$files" ] || { echo "train $n: no LoRA or sample written"; fail=1; }
    for f in $files; do
        if cmp -s "$a/$f" "$b/$f"; then echo "train same    $n $f ($(stat -c %s "$a/$f") bytes)"
        else echo "train DIFFERS $n $f"; fail=1; fi
    done
done
if [ $fail = 0 ]; then echo "identity: all same"; else echo "identity: DIFFERENCES"; fi
exit $fail
