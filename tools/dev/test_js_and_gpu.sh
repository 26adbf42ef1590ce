#!/usr/bin/env bash
# npm test's JS step: Jest, which takes one core (one worker on these 2-core machines), and at the same time the
# end-to-end webgpu project (Chromium with WebGPU on SwiftShader, tests/e2e/gpu*.spec.js) on the other, on a port
# of its own; the wasm project runs after (npm run test:e2e:wasm). Its output is printed once it ends, so that the
# two reports do not interleave. Fails if either fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
E2E_PORT=${GPU_E2E_PORT:-8182} npx playwright test --project webgpu > "$log" 2>&1 &
gpu=$!
node --experimental-vm-modules node_modules/jest/bin/jest.js --maxWorkers=1
js=$?
wait "$gpu"
gpu_status=$?
echo "end-to-end, webgpu project:"
cat "$log"
rm -f "$log"
[ "$js" -eq 0 ] && [ "$gpu_status" -eq 0 ]
