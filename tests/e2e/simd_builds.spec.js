// The page's wasm build: Chromium runs relaxed SIMD, so the engine worker loads the relaxed-SIMD build and the
// status line says so; a browser that refuses relaxed-SIMD modules, as Safari does (simulated: the engine worker's
// WebAssembly.validate answers false for a module holding a relaxed instruction), gets the SIMD128 build and the
// greedy text of the Node API's SIMD128 build. (Node's choice: tests/js/simd_builds.test.js.) Run after
// tools/dev/build.sh.
import { fileURLToPath } from 'node:url';
import { test, expect } from './under_csp.js';
import { simdSupport } from '../../web/lib/engine/simd_support.js';
import { generateGreedilyOnPage, nodeText } from './page-controls.js';

// The page's default model: the bundled model's Q4_0 GGUF file.
const BUNDLED_MODEL_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));

const PROMPT = 'ROMEO:\nWhat light';
const MAX_NEW_TOKENS = 40;
const MODEL_READY_TIMEOUT = 90_000;

// Prepended to the engine worker's module: what validate says of a relaxed-SIMD module in Safari.
const REFUSE_RELAXED_SIMD = `{
  const validate = WebAssembly.validate;
  const relaxed = (bytes) => {
    const b = new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0, bytes.byteLength);
    for (let i = 0; i + 2 < b.length; i++) if (b[i] === 0xfd && (b[i + 1] === 0x85 || b[i + 1] === 0x93) && b[i + 2] === 0x02) return true;
    return false;
  };
  WebAssembly.validate = (bytes) => !relaxed(bytes) && validate(bytes);
}
`;

// Opens the page, generates greedily; -> { status, text, wasm: the .wasm files the engine fetched }.
async function generateOnPage(page) {
  const wasm = [];
  page.on('request', (request) => {
    const match = /\/wasm\/([\w-]+\.wasm)$/.exec(new URL(request.url()).pathname);
    if (match) wasm.push(match[1]);
  });
  const generated = await generateGreedilyOnPage(page, '/', { prompt: PROMPT, maxNewTokens: MAX_NEW_TOKENS, readyTimeout: MODEL_READY_TIMEOUT });
  return { ...generated, wasm };
}

test('Chromium runs the relaxed-SIMD build, and the status line says so', async ({ page }) => {
  const { status, text, wasm } = await generateOnPage(page);
  expect(wasm).toEqual([expect.stringMatching(/^gpt2(-mt)?-relaxed\.wasm$/)]);
  expect(status).toMatch(/ · on the CPU \(WebAssembly, relaxed SIMD\)( because|$)/);
  expect(text.length).toBeGreaterThan(0);
});

test('a browser that refuses relaxed-SIMD modules gets the SIMD128 build, and the same greedy text', async ({ page }) => {
  await page.route('**/js/lib/worker/worker.js', async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: REFUSE_RELAXED_SIMD + await response.text() });
  });
  const { status, text, wasm } = await generateOnPage(page);
  expect(wasm).toEqual([expect.stringMatching(/^gpt2(-mt)?\.wasm$/)]);
  expect(status).toMatch(/ · on the CPU \(WebAssembly, SIMD128\)( because|$)/);
  expect(simdSupport()).toBe('simd128');  // Node's default (web/lib/engine/simd_support.js)
  expect(text).toBe(await nodeText(BUNDLED_MODEL_FILE, PROMPT, { temperature: 0, maxNewTokens: MAX_NEW_TOKENS }));
});
