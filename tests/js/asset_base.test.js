// configure({ assetBase }) in Node (web/lib/gpt2.js, engine/asset_folder.js): the engine's files come from the
// folder it names (a file: URL here), bad values are one-line errors naming the option, and the folder cannot
// change once the engine started from it. The tests share this file's one engine state, so they run in order.
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { configure, loadModel } from '../../web/lib/gpt2.js';

const WASM_FOLDER = fileURLToPath(new URL('../../public/wasm/', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/tiny-gguf/model.gguf', import.meta.url));
const NODE_EXPECTATION = 'configure: assetBase must be the URL of the folder that holds gpt2.wasm (a file: URL in Node)';

let folder;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), 'gpt2-assets-'));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

async function greedyText(model) {
  let text = '';
  for await (const piece of model.generate('Hello', { maxNewTokens: 8, temperature: 0 })) text += piece.text;
  return text;
}

test('configure refuses what is not a file: URL of a folder, and unknown options, naming them', () => {
  expect(() => configure({ assetBase: 42 })).toThrow(new TypeError(`${NODE_EXPECTATION}, got 42`));
  expect(() => configure({ assetBase: 'wasm/' })).toThrow(new TypeError(`${NODE_EXPECTATION}, got "wasm/"`));
  expect(() => configure({ assetBase: 'https://cdn.example.com/gpt2-wasm/' }))
    .toThrow(new TypeError(`${NODE_EXPECTATION}, got "https://cdn.example.com/gpt2-wasm/"`));
  expect(() => configure({ assetsBase: 'file:///srv/wasm/' })).toThrow(new TypeError('configure: unknown option "assetsBase" (known: assetBase)'));
  expect(() => configure(null)).toThrow(new TypeError('configure: options must be an object'));
});

test('the engine starts from the configured folder, also when its URL lacks the final slash', async () => {
  configure({ assetBase: pathToFileURL(folder) });
  await expect(loadModel(FIXTURE)).rejects.toThrow(`the WebAssembly engine is not built (no gpt2.cjs in ${folder}/)`);

  for (const file of ['gpt2.cjs', 'gpt2.wasm', 'gpt2-relaxed.cjs', 'gpt2-relaxed.wasm']) await copyFile(join(WASM_FOLDER, file), join(folder, file));
  const model = await loadModel(FIXTURE);
  try {
    expect((await greedyText(model)).length).toBeGreaterThan(0);
  } finally {
    model.dispose();
  }
});

test('once the engine started, another assetBase is an error and the same one is accepted', () => {
  const inUse = pathToFileURL(`${folder}/`).href;
  expect(() => configure({ assetBase: pathToFileURL(WASM_FOLDER) }))
    .toThrow(new Error(`configure: assetBase must be set before the first model loads (the engine already uses ${inUse})`));
  expect(() => configure({ assetBase: inUse })).not.toThrow();
});
