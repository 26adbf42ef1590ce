// Loading GGUF files in Node through the public API (web/lib/gpt2.js) and the loader (web/lib/loading/loader.js): a .gguf path,
// File/Blob/ArrayBuffer objects, a URL on a local HTTP server (with the Hub's /REPO/resolve/main/FILE layout),
// the tokenizer the file carries, the Cache API copy, and the errors, which name the file. The fixtures
// (tests/fixtures/tiny-random-gguf, gpt2tools.fixtures.make_tiny_gguf_fixture) are the tiny-random model as GGUF files
// and as a folder with the same tokenizer: the F32 file holds the same weights, so it must give the same text.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { ModelLoadError } from '../../web/lib/errors.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { send, sendCut, sendSlow, startFileServer, status } from './file_server.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const GGUF = fileURLToPath(new URL('../fixtures/tiny-random-gguf/', import.meta.url));
const F32_PATH = `${GGUF}model-f32.gguf`;
const Q8_PATH = `${GGUF}model-q8_0.gguf`;
const bytes = {
  f32: readFileSync(F32_PATH),
  q8: readFileSync(Q8_PATH),
  safetensors: readFileSync(`${TINY}model.safetensors`),
};
const folder = {
  config: readFileSync(`${TINY}config.json`, 'utf8'),
  weights: bytes.safetensors,
  vocab: readFileSync(`${GGUF}vocab.json`, 'utf8'),
  merges: readFileSync(`${GGUF}merges.txt`, 'utf8'),
};
const PROMPT = 'ROMEO: the end';
const GREEDY = { temperature: 0, maxNewTokens: 24 };
const HTML_PAGE = '<!DOCTYPE html><html><body>Sign in to continue</body></html>';

const routes = {
  ok: (res, body) => send(res, body, { 'Content-Length': body.length }),
  chunked: (res, body) => send(res, body, {}),
  html: (res) => send(res, Buffer.from(HTML_PAGE), { 'Content-Type': 'application/octet-stream' }),
  cut: (res, body) => sendCut(res, body),
  slow: (res, body) => sendSlow(res, body),
  missing: (res) => status(res, 404, 'Not Found'),
};

let server;
let engine;

beforeAll(async () => {
  engine = await loadEngine();
  server = await startFileServer({ 'model-f32.gguf': bytes.f32, 'model-q8_0.gguf': bytes.q8 }, routes);
});

afterAll(() => server.close());

const hubUrl = (route, file = 'model-f32.gguf') => `${server.baseUrl}/${route}/tiny-random-GGUF/resolve/main/${file}`;

async function greedyText(source, options) {
  const model = await loadModel(source, options);
  try {
    let text = '';
    for await (const piece of model.generate(PROMPT, GREEDY)) text += piece.text;
    return { text, weightTypes: model.weightTypes, config: model.config };
  } finally {
    model.dispose();
  }
}

// Rejection with the given error, checking afterwards that nothing stayed in the heap.
async function expectLoadError(source, check, options) {
  const before = engine.heapUsedBytes();
  const error = await loadModelIntoEngine(engine, modelSource(source), options).then(() => null, (e) => e);
  expect(error).not.toBeNull();
  check(error);
  expect(engine.heapUsedBytes()).toBe(before);
}

describe('a GGUF file is a whole model', () => {
  test('the F32 file gives the same greedy text as the safetensors folder with the same weights', async () => {
    const expected = await greedyText(folder);
    const gguf = await greedyText(F32_PATH);
    expect(expected.text.length).toBeGreaterThan(0);
    expect(gguf.text).toBe(expected.text);
    expect(gguf.config).toEqual(expected.config);
    expect(expected.weightTypes).toBe('fp32');
    expect(gguf.weightTypes).toBe('fp32');
  });

  test('its tokenizer comes from the file: the same ids as the folder\'s vocab.json and merges.txt', async () => {
    const fromFile = await loadModel(Q8_PATH);
    const fromFolder = await loadModel(folder);
    try {
      const text = 'ROMEO: the thing in the end, and the rest <|endoftext|>';
      expect(await fromFile.encode(text)).toEqual(await fromFolder.encode(text));
      expect(await fromFile.decode(await fromFile.encode(text))).toBe(text);
      expect(fromFile.weightTypes).toBe('q8_0');
    } finally {
      fromFile.dispose();
      fromFolder.dispose();
    }
  });

  test('a file with every type the engine runs (tests/fixtures/tiny-gguf) loads and generates, its types listed', async () => {
    const model = await loadModel(fileURLToPath(new URL('../fixtures/tiny-gguf/model.gguf', import.meta.url)));
    try {
      expect(model.weightTypes).toBe('f16, fp32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k');
      const run = model.generate(PROMPT, GREEDY);
      for await (const piece of run) expect(typeof piece.text).toBe('string');
      expect(run.stats.generatedTokens).toBe(GREEDY.maxNewTokens);
    } finally {
      model.dispose();
    }
  });

  test('loads from a Node path, a file: URL, a File, an unnamed Blob, an ArrayBuffer and one-File lists (named .gguf, or not but starting with GGUF\'s magic)', async () => {
    const { text } = await greedyText(F32_PATH);
    const arrayBuffer = bytes.f32.buffer.slice(bytes.f32.byteOffset, bytes.f32.byteOffset + bytes.f32.length);
    for (const source of [
      new URL('../fixtures/tiny-random-gguf/model-f32.gguf', import.meta.url),
      new File([bytes.f32], 'tiny.gguf'),
      new Blob([bytes.f32]),
      arrayBuffer,
      new Uint8Array(arrayBuffer),
      [new File([bytes.f32], 'tiny.gguf')],
      [new File([bytes.f32], 'tiny-weights.bin')],  // one file of another name, with GGUF's magic
    ]) {
      expect((await greedyText(source)).text).toBe(text);
    }
  });

  test('loads from a URL, streaming with progress to 100%, with or without Content-Length', async () => {
    const { text } = await greedyText(F32_PATH);
    const events = [];
    expect((await greedyText(hubUrl('ok'), { onProgress: (event) => events.push(event) })).text).toBe(text);
    expect(events[0]).toEqual({
      file: 'model-f32.gguf', loaded: 0, total: bytes.f32.length, fraction: 0, bytesPerSecond: null, secondsLeft: null, caching: false,
    });
    expect(events.at(-1)).toMatchObject({ file: 'model-f32.gguf', loaded: bytes.f32.length, total: bytes.f32.length, fraction: 1 });
    expect(events.every((event) => event.file === 'model-f32.gguf')).toBe(true);
    expect((await greedyText(hubUrl('chunked'))).text).toBe(text);
  });

  test('weights: "int8" is refused for a GGUF file, before anything is read, and still quantizes a safetensors folder', async () => {
    const requests = server.requestCount();
    const error = await loadModel(hubUrl('ok'), { weights: 'int8' }).then(() => null, (e) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('weights: "int8" applies to safetensors models; model-f32.gguf is a GGUF file, which runs ' +
      'in its own types (leave weights out)');
    expect(server.requestCount()).toBe(requests);
    const int8 = await loadModel(folder, { weights: 'int8' });
    expect(int8.weightTypes).toBe('int8');
    int8.dispose();
  });
});

describe('GGUF errors name the file', () => {
  test('a file that is not GGUF, named .gguf, gets the engine\'s message under its own name', async () => {
    await expectLoadError(new File(['hello, not a model'], 'fake.gguf'), (error) => {
      expect(error).toBeInstanceOf(ModelLoadError);
      expect(error).toMatchObject({ file: 'fake.gguf', kind: 'invalid' });
      expect(error.message).toBe("fake.gguf: not a GGUF file: it starts with 'hell', not 'GGUF'");
    });
    await expectLoadError(new File([bytes.safetensors], 'model.safetensors.gguf'), (error) => {
      expect(error.message).toMatch(/^model\.safetensors\.gguf: not a GGUF file: it starts with /);
    });
  });

  test('a truncated file is reported where it ends, named (an unnamed Blob as model.gguf)', async () => {
    const half = new File([bytes.f32.subarray(0, bytes.f32.length >> 1)], 'half.gguf');
    await expectLoadError(half, (error) => {
      expect(error).toMatchObject({ file: 'half.gguf', kind: 'invalid' });
      expect(error.message).toBe("half.gguf: the file ended at byte 294912, inside tensor 'blk.0.ffn_up.weight' (37888 of 65536 bytes)");
    });
    await expectLoadError(new Blob([bytes.f32.subarray(0, 100)]), (error) => {
      expect(error).toMatchObject({ file: 'model.gguf', kind: 'invalid' });
      expect(error.message).toBe("model.gguf: the file ended at byte 100, inside the value of key 'general.type'");
    });
  });

  test('over HTTP: 404, an HTML page and a cut connection', async () => {
    await expectLoadError(hubUrl('missing'), (error) => {
      expect(error.message).toMatch(/^model-f32\.gguf: HTTP 404 Not Found from http:\/\/127\.0\.0\.1:\d+\/missing\/tiny-random-GGUF\/resolve\/main\/model-f32\.gguf$/);
      expect(error.kind).toBe('http');
    });
    await expectLoadError(hubUrl('html'), (error) => {
      expect(error.message).toMatch(/^model-f32\.gguf: got an HTML page instead of the file/);
    });
    await expectLoadError(hubUrl('cut'), (error) => {
      expect(error.message).toMatch(/^model-f32\.gguf: network error/);
      expect(error.kind).toBe('network');
    });
  });

  test('an AbortSignal rejects with AbortError and frees the partial model', async () => {
    const controller = new AbortController();
    const onProgress = ({ loaded }) => loaded > 0 && controller.abort();
    await expectLoadError(hubUrl('slow'), (error) => {
      expect(error.name).toBe('AbortError');
      expect(error.message).toBe('loading model-f32.gguf was aborted');
    }, { signal: controller.signal, onProgress });
  });

  test('a missing path is named; several .gguf files, or one with the folder\'s files, are refused', async () => {
    await expectLoadError('/nonexistent/gpt2.Q8_0.gguf', (error) => {
      expect(error.message).toMatch(/^gpt2\.Q8_0\.gguf: cannot read \/nonexistent\/gpt2\.Q8_0\.gguf/);
      expect(error.kind).toBe('missing');
    });
    const list = [new File([bytes.q8], 'a.gguf'), new File([bytes.f32], 'b.gguf')];
    await expectLoadError(list, (error) => expect(error.message).toBe('a.gguf: give one .gguf file alone (got a.gguf, b.gguf)'));
    await expectLoadError([new File([bytes.q8], 'a.gguf'), new File([folder.config], 'config.json')], (error) => {
      expect(error.message).toBe('a.gguf: give one .gguf file alone (got a.gguf, config.json)');
    });
    await expectLoadError([new File([bytes.safetensors], 'model.safetensors')], (error) => {
      expect(error.message).toBe('config.json: file not given');  // a folder's file, not a GGUF file
    });
  });
});

describe('GGUF with a Cache API (an in-memory stand-in for the browser\'s)', () => {
  const stored = new Map();
  beforeAll(() => {
    globalThis.caches = {
      open: async () => ({
        match: async (url) => (stored.has(url) ? new Response(stored.get(url)) : undefined),
        put: async (url, response) => stored.set(url, new Uint8Array(await response.arrayBuffer())),
        delete: async (url) => stored.delete(url),
      }),
    };
  });
  afterAll(() => {
    delete globalThis.caches;
  });

  test('a loaded file is cached and loads again without a request; a corrupt cached copy is downloaded again', async () => {
    const url = hubUrl('ok');
    (await loadModelIntoEngine(engine, modelSource(url))).model.dispose();
    expect(Buffer.from(stored.get(url)).equals(bytes.f32)).toBe(true);
    const requests = server.requestCount();
    (await loadModelIntoEngine(engine, modelSource(url))).model.dispose();
    expect(server.requestCount()).toBe(requests);
    stored.set(url, bytes.safetensors);
    (await loadModelIntoEngine(engine, modelSource(url))).model.dispose();
    expect(server.requestCount()).toBe(requests + 1);
    expect(Buffer.from(stored.get(url)).equals(bytes.f32)).toBe(true);
  });
});

describe('the CLI', () => {
  test('--model takes a .gguf path', async () => {
    const cli = fileURLToPath(new URL('../../web/cli/cli.js', import.meta.url));
    const { stdout } = await promisify(execFile)('node', [cli, '--model', F32_PATH, '-n', '24', '--temperature', '0', PROMPT],
      { encoding: 'utf8' });
    expect(stdout).toBe(`${(await greedyText(F32_PATH)).text}\n`);
  });
});
