#!/usr/bin/env bash
# npm test's suites after the build and the C++ tests, in two lanes so that neither core of the 2-core machines
# that run them waits idle, each lane about as long as the other:
#   browser lane: the end-to-end tests' wasm project and the webgpu project's gpu_model.spec.js (WebGPU on
#                 SwiftShader), one Chromium at a time, then Jest with one worker in the relaxed-SIMD wasm build
#                 (GPT2_WASM_SIMD=relaxed, and for Node 20 the V8 flags that make it run relaxed SIMD:
#                 web/lib/engine/simd_support.js), the suites that load an engine; streaming their reports;
#   engine lane:  the sanitizers (their builds with one job), then Jest with one worker in the SIMD128 build
#                 (Node's default), then the webgpu project's other spec files, in a Chromium and a server of their
#                 own, then the cross-browser suite (tests/browsers/run.mjs: Firefox, then WebKit, on servers of
#                 their own); at a lower priority; its report is printed once both lanes end, so that the two reports
#                 do not interleave.
# Each lane runs all of its suites even when one fails; the script fails if any suite failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

engine_lane() {
  local status=0
  # below the browser's priority: the end-to-end tests click while tokens stream, and wait on the page's timers
  renice -n 10 -p "$BASHPID" > /dev/null
  JOBS=1 bash tools/dev/sanitize.sh || status=1
  node --experimental-vm-modules node_modules/jest/bin/jest.js --maxWorkers=1 || status=1
  # another port and output folder than the browser lane's run, which goes on beside this one
  E2E_WEBGPU_SPECS=others E2E_PORT=8182 npx playwright test --project webgpu --output test-results/engine-lane || status=1
  node --test-reporter=spec tests/browsers/run.mjs || status=1
  return "$status"
}

browser_lane() {
  local status=0
  E2E_WEBGPU_SPECS=model npx playwright test || status=1
  local relaxed_flags=()
  if (($(node -p 'process.versions.node.split(".")[0]') < 22)); then
    relaxed_flags=(--experimental-wasm-relaxed-simd --no-liftoff)
  fi
  # the suites that load no engine (the tokenizer, options, types, the server, the opcode renumbering) test the same
  # code in either build: they run once, in the engine lane
  local engine_free='tests/js/(tokenizer|tokenizer_fuzz|types|model_source|option_text|option_table|option_surfaces|architecture_doc|include_layers|widget_options|model_registry|serve|gpu_weights|relaxed_opcodes|thread_plan|run_announcer)\.test\.js$'
  GPT2_WASM_SIMD=relaxed node "${relaxed_flags[@]}" --experimental-vm-modules node_modules/jest/bin/jest.js --maxWorkers=1 \
    --testPathIgnorePatterns "$engine_free" || status=1
  return "$status"
}

log=$(mktemp)
engine_lane > "$log" 2>&1 &
engine=$!
browser_lane
browser_status=$?
wait "$engine"
engine_status=$?
echo "engine lane (sanitizers, Jest in the SIMD128 build, the other webgpu end-to-end tests, Firefox and WebKit):"
cat "$log"
rm -f "$log"
[ "$browser_status" -eq 0 ] && [ "$engine_status" -eq 0 ]
