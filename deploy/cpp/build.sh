#!/usr/bin/env bash
# Build deploy/cpp into deploy/cpp/build (Release). Installs the Debian/Ubuntu packages it needs when missing
# (root, or sudo when not root). Extra arguments go to cmake, e.g.
#   deploy/cpp/build.sh -DONNXRUNTIME_ROOT=/opt/onnxruntime -DTENSORRT_ROOT=/opt/TensorRT
# Environment: OARS_NO_APT=1 never installs; OARS_CPP_BUILD_DIR overrides the build folder; JOBS sets -j.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${OARS_CPP_BUILD_DIR:-$here/build}"

packages=(libopencv-dev libyaml-cpp-dev cmake g++)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ "${OARS_NO_APT:-0}" == 1 ]] || ! command -v apt-get >/dev/null; then
    echo "build.sh: missing packages: ${missing[*]} (install them: apt-get install ${missing[*]})" >&2
    exit 2
  fi
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "build.sh: missing packages: ${missing[*]}; not root and no password-less sudo to install them" >&2
      exit 2
    fi
  fi
  echo "build.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
    "${sudo[@]}" apt-get update -q && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" || {
      echo "build.sh: could not install ${missing[*]} with apt-get" >&2
      exit 2
    }
  fi
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j "${JOBS:-$(nproc)}"
echo "build.sh: built $build/oars_infer"
