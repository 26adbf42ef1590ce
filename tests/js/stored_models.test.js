// The models stored in the Cache API, as listCachedModels() and deleteCachedModel() (web/lib/gpt2.js,
// web/lib/loading/model_cache.js) tell and remove them, with an in-memory stand-in for the browser's Cache API. Models loaded
// over HTTP from a local server (the tiny-random folder, with the tiny GGUF fixture's tokenizer files, and its
// Q8_0 GGUF file) are stored by the loader itself; the other cases store files as the loader does (CacheCopy: the
// file, then its digest) under URLs that are never fetched.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { deleteCachedModel, listCachedModels, loadModel } from '../../web/lib/gpt2.js';
import { CacheCopy, openCache } from '../../web/lib/loading/model_cache.js';
import { useFakeCaches } from './fake_caches.js';
import { send, startFileServer } from './file_server.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const GGUF = fileURLToPath(new URL('../fixtures/tiny-random-gguf/', import.meta.url));
const files = {
  'config.json': readFileSync(`${TINY}config.json`),
  'model.safetensors': readFileSync(`${TINY}model.safetensors`),
  'vocab.json': readFileSync(`${GGUF}vocab.json`),
  'merges.txt': readFileSync(`${GGUF}merges.txt`),
  'model-q8_0.gguf': readFileSync(`${GGUF}model-q8_0.gguf`),
};
const FOLDER_FILES = ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'];
const HOST = 'https://models.example';  // only in the stand-in cache: never fetched

let server;
let stored;  // the stand-in cache's entries: URL -> { body, headers }

beforeAll(async () => {
  server = await startFileServer(files, { ok: (res, body) => send(res, body, { 'Content-Length': body.length }) });
});

afterAll(() => server.close());

beforeEach(() => {
  stored = useFakeCaches();
});

afterEach(() => {
  delete globalThis.caches;
});

const folderUrl = () => `${server.baseUrl}/ok/tiny-random/`;
const ggufUrl = () => `${server.baseUrl}/ok/tiny-random-GGUF/resolve/main/model-q8_0.gguf`;

// Stores a file with its digest, as a download that loaded is stored.
async function storeFile(url, bytes) {
  const copy = new CacheCopy(await openCache(), url, bytes.length);
  await copy.write(bytes);
  expect(await copy.commit()).toBeNull();
}

async function greedyText(model) {
  let text = '';
  for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 12 })) text += piece.text;
  return text;
}

function requestsFor(urls) {
  return server.requests().filter(({ path }) => urls.some((url) => url.endsWith(path))).length;
}

describe('listCachedModels', () => {
  test('lists each model that loaded from a URL by its source, with its files, their bytes and the total, complete', async () => {
    (await loadModel(folderUrl())).dispose();
    (await loadModel(ggufUrl())).dispose();
    const folderFiles = FOLDER_FILES.map((name) => ({ url: folderUrl() + name, bytes: files[name].length }));
    expect(await listCachedModels()).toEqual([
      { source: folderUrl(), files: folderFiles, bytes: FOLDER_FILES.reduce((sum, name) => sum + files[name].length, 0), complete: true },
      { source: ggufUrl(), files: [{ url: ggufUrl(), bytes: files['model-q8_0.gguf'].length }], bytes: files['model-q8_0.gguf'].length, complete: true },
    ]);
    expect(stored.size).toBe(10);  // each file has its digest entry, which is no file of the list
  });

  test('groups files by source: each folder is a model, a .gguf file is one of its own even in a folder, other entries are none', async () => {
    await storeFile(`${HOST}/a/config.json`, new Uint8Array(10));
    await storeFile(`${HOST}/a/gpt2.Q4_0.gguf`, new Uint8Array(30));
    await storeFile(`${HOST}/b/vocab.json`, new Uint8Array(20));
    await storeFile(`${HOST}/a/README.md`, new Uint8Array(5));
    await storeFile(`${HOST}/c.gguf?download=1`, new Uint8Array(40));
    expect((await listCachedModels()).map(({ source, bytes }) => [source, bytes])).toEqual([
      [`${HOST}/a/`, 10], [`${HOST}/a/gpt2.Q4_0.gguf`, 30], [`${HOST}/b/`, 20], [`${HOST}/c.gguf?download=1`, 40],
    ]);
  });

  test('a folder with some of its files stored is listed as incomplete, with the files it has, in the model\'s order', async () => {
    await storeFile(`${HOST}/gpt2/model.safetensors`, new Uint8Array(1000));
    await storeFile(`${HOST}/gpt2/config.json`, new Uint8Array(100));
    expect(await listCachedModels()).toEqual([{
      source: `${HOST}/gpt2/`,
      files: [{ url: `${HOST}/gpt2/config.json`, bytes: 100 }, { url: `${HOST}/gpt2/model.safetensors`, bytes: 1000 }],
      bytes: 1100,
      complete: false,
    }]);
  });

  test('a file stored without its digest (a commit cut short) is not counted, since it would not be used', async () => {
    const cache = await openCache();
    await cache.put(`${HOST}/a/model.safetensors`, new Response(new Uint8Array(1000)));
    await cache.put(`${HOST}/b/model.safetensors`, new Response(new Uint8Array(1000)));
    await storeFile(`${HOST}/a/config.json`, new Uint8Array(100));
    expect(await listCachedModels()).toEqual([
      { source: `${HOST}/a/`, files: [{ url: `${HOST}/a/config.json`, bytes: 100 }], bytes: 100, complete: false },
    ]);
  });

  test('without a Cache API (Node) nothing is stored: [], and deleteCachedModel gives false', async () => {
    delete globalThis.caches;
    expect(await listCachedModels()).toEqual([]);
    expect(await deleteCachedModel(`${HOST}/a/`)).toBe(false);
  });
});

describe('deleteCachedModel', () => {
  test('removes all of a model\'s files and their digests and nothing of the other models: true, then false', async () => {
    for (const name of FOLDER_FILES) await storeFile(`${HOST}/a/${name}`, new Uint8Array(10));
    await storeFile(`${HOST}/a/gpt2.Q4_0.gguf`, new Uint8Array(30));
    await (await openCache()).put(`${HOST}/b/model.safetensors`, new Response(new Uint8Array(10)));  // no digest
    expect(stored.size).toBe(11);

    expect(await deleteCachedModel(`${HOST}/a/`)).toBe(true);
    expect([...stored.keys()]).toEqual([
      `${HOST}/a/gpt2.Q4_0.gguf`, `${HOST}/a/gpt2.Q4_0.gguf?gpt2-wasm-digest=crc32`, `${HOST}/b/model.safetensors`,
    ]);
    expect(await deleteCachedModel(`${HOST}/a/`)).toBe(false);
    expect(await deleteCachedModel(`${HOST}/b/`)).toBe(true);  // a file without its digest goes too
    expect((await listCachedModels()).map(({ source }) => source)).toEqual([`${HOST}/a/gpt2.Q4_0.gguf`]);
  });

  test('takes the source as loadModel does: a folder URL without its last slash, a URL object, a .gguf URL', async () => {
    await storeFile(`${HOST}/a/config.json`, new Uint8Array(10));
    await storeFile(`${HOST}/b/config.json`, new Uint8Array(10));
    await storeFile(`${HOST}/c.gguf`, new Uint8Array(10));
    expect(await deleteCachedModel(`${HOST}/a`)).toBe(true);
    expect(await deleteCachedModel(new URL(`${HOST}/b/`))).toBe(true);
    expect(await deleteCachedModel(`${HOST}/c.gguf`)).toBe(true);
    expect(await listCachedModels()).toEqual([]);
  });

  test('a model in use keeps working once its files are deleted, and loading it again downloads them', async () => {
    const model = await loadModel(folderUrl());
    try {
      const before = await greedyText(model);
      const urls = FOLDER_FILES.map((name) => folderUrl() + name);
      const requests = requestsFor(urls);
      expect(await deleteCachedModel(folderUrl())).toBe(true);
      expect(await listCachedModels()).toEqual([]);
      expect(await greedyText(model)).toBe(before);

      (await loadModel(folderUrl())).dispose();
      expect(requestsFor(urls)).toBe(requests + FOLDER_FILES.length);
      expect(await listCachedModels()).toEqual([expect.objectContaining({ source: folderUrl(), complete: true })]);
    } finally {
      model.dispose();
    }
  });

  test('a source that is not a URL is a TypeError naming deleteCachedModel', async () => {
    await expect(deleteCachedModel(new Blob(['x']))).rejects.toThrow(
      new TypeError('deleteCachedModel: the source must be a model\'s URL (a string or URL), got [object Blob]'));
    await expect(deleteCachedModel('http://[bad/')).rejects.toThrow(new TypeError('deleteCachedModel: not a URL: http://[bad/'));
  });
});
