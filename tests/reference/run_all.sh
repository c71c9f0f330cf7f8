#!/usr/bin/env bash
# run_all.sh — regenerates every torch reference fixture (flux_ref.py, taef1_ref.py,
# vgg19_ref.py, vae_ref.py) into OUTDIR (default tests/fixtures), then, when diffusers is
# installed, writes vae_ref.py's FLUX.1 autoencoder as diffusers saves it
# (vae_diffusers_ref.py) and cross-checks the FLUX models against diffusers. Needs python3 with torch,
# torchvision, safetensors, numpy, pillow (PYTHON=... to pick one), and the
# shared assets (../shared/assets/{taef1,photos}, or TAEF1_DIR / PHOTOS_DIR).
# Usage: bash tests/reference/run_all.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/tests/fixtures}"
py="${PYTHON:-python3}"
taef1="${TAEF1_DIR:-$root/../shared/assets/taef1}"
photos="${PHOTOS_DIR:-$root/../shared/assets/photos}"
mkdir -p "$out"
"$py" "$here/flux_ref.py" "$out"
"$py" "$here/taef1_ref.py" "$out" "$taef1" "$photos"
"$py" "$here/vgg19_ref.py" "$out" "$photos"
"$py" "$here/vae_ref.py" "$out" "$root/assets/photos"
if "$py" -c "import diffusers" 2>/dev/null; then
    "$py" "$here/vae_diffusers_ref.py" "$out" # reads vae_ref.py's vae1_small.safetensors
    "$py" "$here/flux_check_diffusers.py" "$out"
else
    echo "diffusers not installed: skipped vae_diffusers_ref.py and flux_check_diffusers.py"
fi
ls -l "$out"
