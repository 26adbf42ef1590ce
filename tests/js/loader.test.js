// Tests of web/lib/loading/loader.js in Node against a local HTTP server on 127.0.0.1 that serves the tiny-random fixture
// and misbehaves on purpose (error statuses, HTML pages, cut connections, slow bodies), plus local sources.
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { ModelLoadError } from '../../web/lib/errors.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { send, sendCut, sendSlow, startFileServer, status } from './file_server.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const VOCAB = fileURLToPath(new URL('../fixtures/tiny-random-gguf/', import.meta.url));  // a tokenizer of tiny-random's 384 ids
const files = {
  'config.json': readFileSync(`${TINY}config.json`),
  'model.safetensors': readFileSync(`${TINY}model.safetensors`),
  'vocab.json': readFileSync(`${VOCAB}vocab.json`),
  'merges.txt': readFileSync(`${VOCAB}merges.txt`),
};
const HTML_PAGE = '<!DOCTYPE html><html><body>Sign in to continue</body></html>';

// Behaviour by the first path segment; the rest names the file. Only model.safetensors misbehaves.
const routes = {
  ok: (res, body) => send(res, body, { 'Content-Length': body.length }),
  chunked: (res, body) => send(res, body, {}),
  missing: (res) => status(res, 404, 'Not Found'),
  broken: (res, body, name) => (name === 'model.safetensors' ? status(res, 500, 'Internal Server Error') : routes.ok(res, body)),
  html: (res, body, name) =>
    name === 'model.safetensors' ? send(res, Buffer.from(HTML_PAGE), { 'Content-Type': 'text/html' }) : routes.ok(res, body),
  disguised: (res, body, name) =>
    name === 'model.safetensors' ? send(res, Buffer.from(HTML_PAGE), { 'Content-Type': 'application/octet-stream' }) : routes.ok(res, body),
  cut: (res, body, name) => (name === 'model.safetensors' ? sendCut(res, body) : routes.ok(res, body)),
  slow: (res, body, name) => (name === 'model.safetensors' ? sendSlow(res, body) : routes.ok(res, body)),
  badjson: (res, body, name) => (name === 'config.json' ? send(res, Buffer.from('{"n_embd": 64,'), {}) : routes.ok(res, body)),
  badvocab: (res, body, name) => (name === 'vocab.json' ? send(res, Buffer.from('{"a": 0}'), {}) : routes.ok(res, body)),
};

let server;
let baseUrl;
let engine;

beforeAll(async () => {
  engine = await loadEngine();
  server = await startFileServer(files, routes);
  baseUrl = server.baseUrl;
});

afterAll(() => server.close());

function load(source, options = {}) {
  return loadModelIntoEngine(engine, modelSource(source), { withTokenizer: false, ...options });
}

async function expectLoads(source, options) {
  const { model } = await load(source, options);
  expect(model.config.n_vocab).toBe(384);
  const session = model.createSession();
  session.setSampling({ temperature: 0 });
  expect(session.prefill([259, 73, 75, 222, 59, 137, 172])).toBe(25);  // greedy.json's first token
  session.dispose();
  model.dispose();
}

// Rejection with the given error, checking afterwards that no partial download stayed in the heap.
async function expectLoadError(source, check, options) {
  const before = engine.heapUsedBytes();
  const error = await load(source, options).then(() => null, (e) => e);
  expect(error).not.toBeNull();
  check(error);
  expect(engine.heapUsedBytes()).toBe(before);
}

describe('loader over HTTP', () => {
  test('loads a folder URL, with or without a trailing slash, reporting progress to 100%', async () => {
    const events = [];
    await expectLoads(`${baseUrl}/ok/`, { onProgress: (event) => events.push(event) });
    await expectLoads(`${baseUrl}/ok`);
    const weights = events.filter((e) => e.file === 'model.safetensors');
    expect(weights[0]).toEqual({
      file: 'model.safetensors', loaded: 0, total: files['model.safetensors'].length, fraction: 0, bytesPerSecond: null, secondsLeft: null, caching: false,
    });
    expect(weights.at(-1)).toMatchObject({
      file: 'model.safetensors',
      loaded: files['model.safetensors'].length,
      total: files['model.safetensors'].length,
      fraction: 1,
    });
    expect(events.find((e) => e.file === 'config.json' && e.fraction === 1)).toBeDefined();
    for (let i = 1; i < weights.length; i++) expect(weights[i].loaded).toBeGreaterThanOrEqual(weights[i - 1].loaded);
  });

  test('loads without Content-Length by growing the heap buffer', async () => {
    const events = [];
    await expectLoads(`${baseUrl}/chunked/`, { onProgress: (event) => events.push(event) });
    expect(events.at(-1)).toMatchObject({ file: 'model.safetensors', fraction: 1 });
    expect(events.some((e) => e.total === null && e.fraction === null)).toBe(true);
  });

  test('404 and 500 name the file and the status', async () => {
    await expectLoadError(`${baseUrl}/missing/`, (error) => {
      expect(error).toBeInstanceOf(ModelLoadError);
      expect(error.message).toMatch(/^config\.json: HTTP 404 Not Found from http:\/\/127\.0\.0\.1:\d+\/missing\/config\.json$/);
      expect(error).toMatchObject({ file: 'config.json', kind: 'http' });
    });
    await expectLoadError(`${baseUrl}/broken/`, (error) => {
      expect(error.message).toMatch(/^model\.safetensors: HTTP 500 Internal Server Error/);
      expect(error.kind).toBe('http');
    });
  });

  test('an HTML page served with status 200 is reported as not the file', async () => {
    for (const route of ['html', 'disguised']) {
      await expectLoadError(`${baseUrl}/${route}/`, (error) => {
        expect(error.message).toMatch(/^model\.safetensors: got an HTML page instead of the file/);
        expect(error.kind).toBe('invalid');
      });
    }
  });

  test('a corrupt config.json is reported as invalid JSON', async () => {
    await expectLoadError(`${baseUrl}/badjson/`, (error) => {
      expect(error.message).toMatch(/^config\.json: invalid JSON/);
      expect(error.kind).toBe('invalid');
    });
  });

  test('a connection cut at 90% is a network error', async () => {
    await expectLoadError(`${baseUrl}/cut/`, (error) => {
      expect(error.message).toMatch(/^model\.safetensors: network error/);
      expect(error.kind).toBe('network');
    });
  });

  test('a refused connection is a network error naming the file', async () => {
    const closed = createServer();
    await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${closed.address().port}/`;
    await new Promise((resolve) => closed.close(resolve));
    await expectLoadError(url, (error) => {
      expect(error.message).toMatch(/^config\.json: network error fetching .*(CORS)/);
      expect(error.kind).toBe('network');
    });
  });

  test('an AbortSignal rejects with AbortError and frees the partial buffer', async () => {
    const controller = new AbortController();
    const onProgress = ({ file, loaded }) => {
      if (file === 'model.safetensors' && loaded > 0) controller.abort();
    };
    await expectLoadError(`${baseUrl}/slow/`, (error) => {
      expect(error.name).toBe('AbortError');
      expect(error.message).toMatch(/model\.safetensors/);
    }, { signal: controller.signal, onProgress });
    const aborted = AbortSignal.abort();
    await expectLoadError(`${baseUrl}/ok/`, (error) => expect(error.name).toBe('AbortError'), { signal: aborted });
  });
});

describe('loader with a Cache API (an in-memory stand-in for the browser\'s)', () => {
  const stored = new Map();
  const fakeCaches = {
    open: async () => ({
      match: async (url) => (stored.has(url) ? new Response(stored.get(url).body, { headers: stored.get(url).headers }) : undefined),
      put: async (url, response) => {
        const body = new Uint8Array(await response.arrayBuffer());
        stored.set(url, { body, headers: Object.fromEntries(response.headers) });
      },
      delete: async (url) => stored.delete(url),
    }),
  };
  beforeAll(() => {
    globalThis.caches = fakeCaches;
  });
  afterAll(() => {
    delete globalThis.caches;
  });

  test('a completed load is cached and the next load makes no requests', async () => {
    const { model, tokenizer } = await loadModelIntoEngine(engine, modelSource(`${baseUrl}/ok/`), { withTokenizer: true });
    model.dispose();
    expect(tokenizer.vocabSize).toBe(384);
    expect(tokenizer.decode(tokenizer.encode('ROMEO: the end'))).toBe('ROMEO: the end');
    expect(Buffer.from(stored.get(`${baseUrl}/ok/model.safetensors`).body).equals(files['model.safetensors'])).toBe(true);
    expect(stored.size).toBe(8);  // the four files and their digests
    const requestsBefore = server.requestCount();
    const events = [];
    await expectLoads(`${baseUrl}/ok/`, { onProgress: (event) => events.push(event) });
    expect(server.requestCount()).toBe(requestsBefore);
    expect(events.at(-1)).toMatchObject({ file: 'model.safetensors', fraction: 1 });
  });

  test('failed, cut, aborted or invalid downloads are never cached', async () => {
    const controller = new AbortController();
    const abortOnFirstBytes = ({ file, loaded }) => file === 'model.safetensors' && loaded > 0 && controller.abort();
    for (const [route, options] of [
      ['broken', {}],
      ['html', {}],
      ['disguised', {}],
      ['cut', {}],
      ['badjson', {}],
      ['slow', { signal: controller.signal, onProgress: abortOnFirstBytes }],
    ]) {
      await expect(load(`${baseUrl}/${route}/`, options)).rejects.toThrow();
      expect([...stored.keys()].filter((url) => url.includes(`/${route}/`))).toEqual([]);
    }
  });

  test('cached files that do not make a valid model are evicted and downloaded again', async () => {
    stored.set(`${baseUrl}/ok/config.json`, { body: new TextEncoder().encode('{"vocab_size": 384}'), headers: {} });
    await expectLoads(`${baseUrl}/ok/`);
    expect(Buffer.from(stored.get(`${baseUrl}/ok/config.json`).body).equals(files['config.json'])).toBe(true);
  });
});

describe('loader from local sources', () => {
  test('a Node folder path', async () => {
    await expectLoads(TINY);
    await expectLoads(new URL('../fixtures/tiny-random/', import.meta.url));
  });

  test('objects of ArrayBuffer, typed arrays and Blobs', async () => {
    const weights = files['model.safetensors'];
    const arrayBuffer = weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.length);
    await expectLoads({ config: files['config.json'].toString('utf8'), weights: arrayBuffer });
    await expectLoads({ config: new Blob([files['config.json']]), weights: new Blob([weights]) });
  });

  test('an array of Files matched by name', async () => {
    const list = [new File([files['model.safetensors']], 'model.safetensors'), new File([files['config.json']], 'config.json')];
    await expectLoads(list);
  });

  test('a missing file is named', async () => {
    await expectLoadError({ config: files['config.json'] }, (error) => {
      expect(error.message).toBe('model.safetensors: file not given');
      expect(error.kind).toBe('missing');
    });
    await expectLoadError('/nonexistent/folder', (error) => {
      expect(error.message).toMatch(/^config\.json: cannot read \/nonexistent\/folder\/config\.json/);
    });
  });

  test('weights that are not safetensors are rejected early', async () => {
    await expectLoadError({ config: files['config.json'], weights: new Uint8Array(16).fill(0x41) }, (error) => {
      expect(error.message).toMatch(/^model\.safetensors: not a safetensors file/);
    });
  });
});

describe('the tokenizer the loader builds', () => {
  test('a bad tokenizer is reported before the weights are downloaded', async () => {
    const error = await loadModelIntoEngine(engine, modelSource(`${baseUrl}/badvocab/`)).catch((e) => e);
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'vocab.json + merges.txt', kind: 'invalid' });
    expect(server.requests().map(({ path }) => path).filter((path) => path.startsWith('/badvocab/')))
      .toEqual(['/badvocab/config.json', '/badvocab/vocab.json', '/badvocab/merges.txt']);
  });

  test('vocab.json and merges.txt make the tokenizer; a larger vocabulary than the model\'s, or a bad one, is named', async () => {
    const { model, tokenizer } = await loadModelIntoEngine(engine, modelSource(`${baseUrl}/ok/`));
    model.dispose();
    expect(tokenizer.decode(tokenizer.encode('ROMEO: the end'))).toBe('ROMEO: the end');
    const gpt2 = fileURLToPath(new URL('../fixtures/gpt2-vocab/', import.meta.url));
    const folder = { config: files['config.json'], weights: files['model.safetensors'], merges: files['merges.txt'] };
    await expectLoadError({ ...folder, vocab: readFileSync(`${gpt2}vocab.json`), merges: readFileSync(`${gpt2}merges.txt`) }, (error) => {
      expect(error).toMatchObject({ file: 'vocab.json + merges.txt', kind: 'invalid' });
      expect(error.message).toBe('vocab.json + merges.txt: has 50257 tokens but the model only 384: files of different models?');
    }, { withTokenizer: true });
    await expectLoadError({ ...folder, vocab: '{"a": 0}' }, (error) => {
      expect(error.message).toBe('vocab.json + merges.txt: invalid tokenizer: createTokenizer: merges line 2 "Ġ t" uses "Ġ", which is not in the vocab');
    }, { withTokenizer: true });
  });
});
