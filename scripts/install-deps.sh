#!/usr/bin/env bash
# Installs the Debian 12 packages aether needs to build, test and train, if any are missing.
# Uses apt-get as root, or through sudo otherwise. Safe to run repeatedly.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache clang
  # the format check of scripts/test.sh (every tracked C++ file as .clang-format says)
  clang-format
  # libFuzzer (clang's runtime; not part of the clang package) for the fuzz targets in fuzz/
  libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # OpenMP for clang builds (g++ has libgomp). oneDNN is not Debian's 2.6: scripts/install-onednn.sh
  # (run last, below) installs oneDNN 3.2 from PyPI.
  libomp-dev
  nlohmann-json3-dev libcli11-dev zlib1g-dev liblzma-dev libzip-dev libcurl4-openssl-dev libssl-dev
  # LAPACK's symmetric eigen-decomposition (nn::init::patch_whitening)
  liblapacke-dev
  # image-folder data sets (aether/data/image_folder.h): PNG by libpng, JPEG by libjpeg-turbo, BMP
  # and GIF by stb_image (src/data/image_file.h), and resizing by stb_image_resize
  libpng-dev libjpeg62-turbo-dev libstb-dev
  # Gloo: the collectives of data-parallel training (src/dist, docs/distributed.md)
  libgloo-dev
  python3 xz-utils
  # the Python package (pip install . in a venv; python/, pyproject.toml)
  python3-venv python3-dev
  # scripts/fresh-check.sh: a bare Debian 12 root to run the quickstart in.
  debootstrap
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "aether: installing missing packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# oneDNN 3.2 (needs python3 and python3-venv from the list above).
"$(dirname "$0")/install-onednn.sh"
