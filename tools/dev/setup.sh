#!/usr/bin/env bash
# One-time set-up shared by `npm start`, `npm test` and CI: system packages, then npm dependencies.
# As root it installs missing Debian packages with apt-get; otherwise it prints the exact command.
# --bench (`npm run bench`) also installs the benchmark's own packages (tools/bench/package.json: the engines it
# compares with) into tools/bench/node_modules, which nothing else needs.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ $# -gt 1 || ( $# -eq 1 && $1 != --bench ) ]]; then
  echo "setup.sh: unknown arguments: $* (the only option is --bench)" >&2
  exit 1
fi

# Debian/Ubuntu packages: compilers and CMake, Eigen and GoogleTest for the native engine and its
# tests, Emscripten for the WebAssembly build, clang 16 and its wasm-ld for the relaxed-SIMD wasm build
# (tools/toolchain/README.md), Chromium for the end-to-end tests, Firefox ESR, and WebKitGTK's WebDriver with its
# MiniBrowser on a virtual X server (Xvfb), for the cross-browser tests (tests/browsers/), clang-format for the C++
# style check (npm run lint), Python with NumPy for the Python tools and their checks (ctest) and pyflakes3 to lint
# them (npm run lint).
required_packages=(g++ cmake make libeigen3-dev libgtest-dev emscripten clang-16 lld-16 chromium firefox-esr
                   webkit2gtk-driver xvfb clang libclang-rt-14-dev clang-format python3 python3-numpy pyflakes3)

missing=()
for package in "${required_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing system packages. Install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# npm dependencies of the package in folder $1: reinstalled when its lockfile is newer than the installed tree.
install_npm_dependencies() {
  if [[ ! -f $1/node_modules/.package-lock.json || $1/package-lock.json -nt $1/node_modules/.package-lock.json ]]; then
    echo "setup: installing the npm dependencies of $1/package.json"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

install_npm_dependencies .
if [[ $# -eq 1 ]]; then
  install_npm_dependencies tools/bench
fi
