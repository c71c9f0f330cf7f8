#!/usr/bin/env bash
# run_all.sh — regenerates every torch reference fixture (flux_ref.py, taef1_ref.py,
# vgg19_ref.py, vae_ref.py) into OUTDIR (default tests/fixtures), then cross-checks the FLUX
# models against diffusers when it is installed. Needs python3 with torch,
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
    "$py" "$here/flux_check_diffusers.py" "$out"
else
    echo "diffusers not installed: skipped flux_check_diffusers.py"
fi
ls -l "$out"
