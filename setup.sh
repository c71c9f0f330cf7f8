#!/bin/bash
# setup.sh — orakul's whole set-up on a fresh Debian 12 / Ubuntu 22.04 / 24.04 machine:
#   ./setup.sh          install the packages the build needs (when missing), configure
#                       (CUDA when nvcc is found, else the CPU only), build with every
#                       core, then train the quickstart (configs/quickstart.yaml)
#   ./setup.sh test     the same set-up, then the test suite (README.md, "Tests")
#   ./setup.sh build    the set-up only
# Packages are installed as root, or through sudo when it needs no password;
# otherwise the script prints the apt-get line to run and exits with 1. Running it
# again rebuilds what changed; a finished quickstart is not trained again (orakul
# resumes from its saved state and finds nothing to do; rm -rf output/quickstart
# trains it afresh).
# Environment: ORAKUL_BUILD=<dir> builds there instead of ./build;
# ORAKUL_CUDA=OFF builds for the CPU only even where nvcc exists.
set -euo pipefail
cd "$(dirname "$0")"
build=${ORAKUL_BUILD:-build}
what=${1:-quickstart}
case $what in
  quickstart|test|build) ;;
  *) echo "usage: ./setup.sh [quickstart|test|build]" >&2; exit 2 ;;
esac

# -- 1. packages ------------------------------------------------------------------
pkgs=(build-essential cmake pkg-config libyaml-dev libcunit1-dev libjansson-dev libpng-dev
      libjpeg-dev libwebp-dev libonig-dev libutf8proc-dev zlib1g-dev)
distro=$(. /etc/os-release 2>/dev/null && echo "${ID:-?} ${VERSION_ID:-}${ID_LIKE:+ (like $ID_LIKE)}" || echo unknown)
if ! command -v dpkg-query >/dev/null || ! grep -qwE 'debian|ubuntu' <<<"$distro"; then
  echo "== packages: $distro is not Debian or Ubuntu: install the equivalents of" \
       "${pkgs[*]} yourself; trying to build anyway" >&2
else
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "== packages: all installed ($distro)"
  else
    as=()
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then as=(sudo); else
        echo "== packages missing; run this (as root), then ./setup.sh again:" >&2
        echo "   sudo apt-get install -y ${missing[*]}" >&2
        exit 1
      fi
    fi
    echo "== ${as[*]:+${as[*]} }apt-get install ${missing[*]}"
    "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || {
      echo "== apt-get failed; on Ubuntu, libcunit1-dev, libonig-dev and libutf8proc-dev are in" \
           "'universe': sudo add-apt-repository universe, then ./setup.sh again" >&2
      exit 1
    }
  fi
fi

# -- 2. configure (once) and build ------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  cuda=(-DORAKUL_CUDA=OFF)
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  if [ -n "$nvcc" ] && [ "${ORAKUL_CUDA:-ON}" != OFF ]; then
    cuda=(-DORAKUL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
    # this machine's GPU only (e.g. 8.6 -> 86-real); without one, CMakeLists.txt's default
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
    [[ $cc =~ ^[0-9]+$ ]] && cuda+=(-DCMAKE_CUDA_ARCHITECTURES="$cc-real")
  fi
  echo "== configure $build: ${cuda[*]}"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda[@]}"
fi
echo "== build $build (-j$(nproc))"
cmake --build "$build" -j"$(nproc)"

# -- 3. what was asked ------------------------------------------------------------------
case $what in
  build) echo "== built: $build/orakul" ;;
  test)
    # README.md's test command (.ci/run runs that line); GPU suites too when a GPU answers
    gpu=(-LE gpu)
    grep -q '^ORAKUL_CUDA:BOOL=ON' "$build/CMakeCache.txt" && nvidia-smi -L >/dev/null 2>&1 && gpu=()
    echo "== ctest --test-dir $build ${gpu[*]} --output-on-failure -j2"
    ctest --test-dir "$build" "${gpu[@]}" --output-on-failure -j2 ;;
  quickstart)
    # a finished run says "nothing to do"; rm -rf output/quickstart trains it afresh
    echo "== $build/orakul run configs/quickstart.yaml"
    "$build/orakul" run configs/quickstart.yaml
    echo "== quickstart: the LoRA is in output/quickstart/, its samples in output/quickstart/samples/" \
         "(README.md says what they show; rm -rf output/quickstart to train it again)" ;;
esac
