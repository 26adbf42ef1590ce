#!/usr/bin/env node
// Writes web/lib/engine/engine_constants.js, the engine's constants (WasmEngine.constants: wasm/bindings.cpp's
// constants() and samplingDefaults()) as an ES module, for JS that needs them before an engine instance exists
// (the option table, command-line flags, widget attributes, the thread count). Read from the built single-thread
// engine, so the module holds the engine's own values; tests/js/engine_limits.test.js fails when the two differ,
// naming this script. usage (after npm run build): node tools/dev/write_engine_constants.mjs
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';

export const CONSTANTS_MODULE = fileURLToPath(new URL('../../web/lib/engine/engine_constants.js', import.meta.url));

// -> the module's text for constants (WasmEngine.constants)
export function constantsModule({ limits, enums, weightNames, gpuCommands, samplingDefaults }) {
  const exported = { LIMITS: limits, ENUMS: enums, WEIGHT_NAMES: weightNames, GPU_COMMANDS: gpuCommands, SAMPLING_DEFAULTS: samplingDefaults };
  const lines = Object.entries(exported).map(([name, value]) => `export const ${name} = deepFreeze(${JSON.stringify(value, null, 2)});`);
  return `// The engine's constants (WasmEngine.constants, web/lib/engine/engine.js) for JS that runs before an engine
// exists. Written by tools/dev/write_engine_constants.mjs from the built engine: do not edit.
function deepFreeze(value) {
  if (value && typeof value === 'object') for (const inner of Object.values(Object.freeze(value))) deepFreeze(inner);
  return value;
}

${lines.join('\n\n')}
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONSTANTS_MODULE, constantsModule((await loadEngine({ simd: 'simd128' })).constants));
  console.log(`wrote ${CONSTANTS_MODULE}`);
}
