// The shipped engine (public/wasm/gpt2.wasm, gpt2-mt.wasm and their relaxed-SIMD twins) exports only the product API: the test and
// benchmark hooks (session.logits(), HeapBlock and its bandwidth probe, HeapReserve that fills the heap) are in the testing build alone.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { simdSupport } from '../../web/lib/engine/simd_support.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TESTING_HOOKS = ['logits', 'HeapBlock', 'streamRead', 'HeapReserve'];

// The embind names a build registers: its classes, their methods, its functions (read from a live instance).
function registeredNames(engine) {
  return engine.call((module) => {
    const names = [];
    for (const [name, value] of Object.entries(module)) {
      if (typeof value !== 'function') continue;
      names.push(name);
      if (value.prototype) names.push(...Object.getOwnPropertyNames(value.prototype));
    }
    return names;
  });
}

// the build this Jest run loads (npm test runs it in both)
const suffix = simdSupport() === 'relaxed' ? '-relaxed' : '';
describe.each([
  [`gpt2${suffix}`, 1],
  [`gpt2-mt${suffix}`, 2],
])('the shipped %s.wasm', (name, threads) => {
  test('exports no test or benchmark hook, and no allocator for JS', () => {
    const module = new WebAssembly.Module(readFileSync(`${ROOT}public/wasm/${name}.wasm`));
    const exports = WebAssembly.Module.exports(module).map((entry) => entry.name);
    expect(exports).not.toContain('malloc');
    expect(exports).not.toContain('free');
    expect(exports.filter((entry) => /stream|logits/i.test(entry))).toEqual([]);
  });

  test('registers the product classes and functions but none of the testing build\'s', async () => {
    const product = registeredNames(await loadEngine({ threads }));
    expect(product).toEqual(expect.arrayContaining(['ModelLoader', 'Model', 'Session', 'BeamSearch', 'heapUsedBytes', 'heapBytes', 'constants', 'samplingDefaults', 'feedPrompt', 'staging']));
    expect(product.filter((entry) => TESTING_HOOKS.includes(entry))).toEqual([]);
    expect(product).not.toContain('HEAPU8');
    const testing = registeredNames(await loadEngine({ threads, testing: true }));
    expect(testing).toEqual(expect.arrayContaining(TESTING_HOOKS));  // the names checked above are the real ones
  });
});
