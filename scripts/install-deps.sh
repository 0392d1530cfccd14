#!/usr/bin/env bash
# Installs the Debian 12 packages ember builds and tests with, if any is missing.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --tools  also python3-torch + libopenblas0-pthread (tools/, bench/),
#                                    unicode-data (tools/make_unicode_tables.py),
#                                    python3-matplotlib (bench/llama_report.py)
set -euo pipefail

pkgs=(cmake g++ make pkg-config
      flatbuffers-compiler libflatbuffers-dev   # schema/ember.fbs -> C++ header; FlatBuffers runtime
      doctest-dev                               # tests
      libcli11-dev                              # command line
      nlohmann-json3-dev                        # safetensors header, model_args, fixtures
      libzip-dev zlib1g-dev                     # PyTorch zip checkpoints
      libxxhash-dev                             # .ember data checksum
      libssl-dev                                # SHA-256 (provenance, flashing)
      libpng-dev libgd3                         # ember attn --png: PNG encoding; the label font (gd's built-in bitmap font, opened at run time)
      binutils dpkg-dev)                        # readelf (linking tests); cpack -G DEB's dpkg-shlibdeps (install test)
if [[ "${1:-}" == "--tools" ]]; then
  pkgs+=(python3 python3-torch libopenblas0-pthread unicode-data python3-matplotlib)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
