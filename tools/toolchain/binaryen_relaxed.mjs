#!/usr/bin/env node
// Runs one of binaryen 108's tools (Debian's, in /usr/bin) on modules that hold standard relaxed-SIMD opcodes:
// every input module is renumbered to binaryen's opcodes first, the output module back to the standard ones after
// (relaxed_opcodes.mjs). The relaxed wasm build points emscripten here (EM_BINARYEN_ROOT=tools/toolchain/binaryen,
// whose bin/ holds one link to binaryen_tool.sh per tool emcc runs), since emscripten 3.1.6 always passes the
// linked module through wasm-emscripten-finalize and wasm-opt. Usage: binaryen_relaxed.mjs TOOL ARGS...
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { renumberRelaxedOpcodes } from './relaxed_opcodes.mjs';

const BINARYEN_BIN = '/usr/bin';
const [tool, ...args] = process.argv.slice(2);

// The bytes of the module at path, or null where path is no file or no WebAssembly module.
const readModule = (path) => {
  try {
    if (!statSync(path).isFile()) return null;
    const bytes = readFileSync(path);
    return bytes.length >= 4 && bytes[0] === 0 && bytes[1] === 0x61 && bytes[2] === 0x73 && bytes[3] === 0x6d ? bytes : null;
  } catch {
    return null;
  }
};

const scratch = mkdtempSync(join(tmpdir(), 'binaryen-relaxed-'));
let status = 1;
try {
  const outputs = [];
  const passed = args.map((arg, i) => {
    if (args[i - 1] === '-o') {
      const temporary = join(scratch, `out-${i}-${basename(arg)}`);
      outputs.push({ temporary, path: arg });
      return temporary;
    }
    const module = arg.startsWith('-') ? null : readModule(arg);
    if (module) {
      const temporary = join(scratch, `in-${i}-${basename(arg)}`);
      writeFileSync(temporary, renumberRelaxedOpcodes(module, 'binaryen').module);
      return temporary;
    }
    return arg;
  });
  const run = spawnSync(join(BINARYEN_BIN, tool), passed, { stdio: 'inherit' });
  status = run.status ?? 1;
  if (run.error) {
    console.error(`binaryen_relaxed: cannot run ${join(BINARYEN_BIN, tool)}: ${run.error.message}`);
    status = 1;
  }
  if (status === 0)
    for (const { temporary, path } of outputs)
      writeFileSync(path, renumberRelaxedOpcodes(readFileSync(temporary), 'standard').module);
} catch (error) {
  console.error(`binaryen_relaxed: ${tool}: ${error.message}`);
  status = 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(status);
