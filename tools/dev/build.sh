#!/usr/bin/env bash
# Builds everything the site, the tests and the CLI need:
#   build/native/  the native tool (gpt2) and C++ tests
#   public/wasm/   the WebAssembly engine: gpt2.wasm + gpt2.cjs (Node) + gpt2.mjs (browsers, workers)
#   public/js/     a copy of web/, folders kept (the page loads js/page/*.js; js/lib/engine/engine.js finds the wasm)
#   public/gpt2-widget.js  the embeddable widget as one script (tools/dev/bundle_web.mjs), at the site root so embed
#                          snippets stay short; public/wasm/gpt2-worker.js, the engine worker as one module
# Both builds are CMake's: the wasm build (build/wasm) writes everything under public/ (wasm/CMakeLists.txt,
# web/CMakeLists.txt), so a `cmake --build build/wasm` after editing web/ updates the site too.
# JOBS (default 2) sets the parallel build jobs: the machines are shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=${JOBS:-2}

# emcc's optimizing JS passes need acorn, which Debian installs under /usr/share/nodejs.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release
cmake --build build/native -j"$jobs"

emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release
cmake --build build/wasm -j"$jobs"
echo "build: native tool in build/native, wasm in public/wasm, web/ copied to public/js"
