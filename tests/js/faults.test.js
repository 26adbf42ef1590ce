// Bad input and faults through the Node API (web/lib/gpt2.js): network faults not covered by
// loader.test.js (Content-Length mismatches, retry after a fault, a full Cache API quota), a model too large
// for the wasm heap, hostile prompts (huge, longer than the context, odd Unicode, "<|endoftext|>"), and memory
// staying flat over a thousand generations. Uses the bundled tiny-shakespeare model (n_ctx 256).
import { createServer as createTcpServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadModel } from '../../web/lib/gpt2.js';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { sendCut, startFileServer } from './file_server.js';

jest.setTimeout(240_000);

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const files = Object.fromEntries(
  ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'].map((name) => [name, readFileSync(BUNDLED + name)]),
);
const XL_CONFIG = Buffer.from(JSON.stringify({
  model_type: 'gpt2', vocab_size: 50257, n_positions: 1024, n_ctx: 1024, n_embd: 1600, n_head: 25, n_layer: 48,
  layer_norm_epsilon: 1e-5, bos_token_id: 50256, eos_token_id: 50256,
}));
const XL_FILE_BYTES = 6_431_829_964;  // openai-community/gpt2-xl model.safetensors
// Its fp32 weights in the engine (the file less the attn.bias mask buffers and the header), refused from config.json alone.
const XL_WEIGHT_BYTES = 6_230_444_800;

// The model.safetensors fault of each route; other files are served intact. `faults` can be changed by a test
// (e.g. to fix the fault and retry).
const faults = {
  ok: null,
  flaky: 'cut',
  long: 'long',      // Content-Length larger than the body, then the connection ends
  short: 'short',    // Content-Length smaller than the body: the file arrives truncated
  corrupt: 'corrupt',
  xl: 'xl',
};

let server;
let rawServer;
let baseUrl;
let rawUrl;
let engine;

beforeAll(async () => {
  engine = await loadEngine();
  const serveWithFault = (route) => (res, body, name) => {
    const fault = name === 'model.safetensors' ? faults[route] : null;
    if (route === 'xl' && name === 'config.json') return res.end(XL_CONFIG);
    if (fault === 'cut') return sendCut(res, body);
    if (fault === 'corrupt') {
      const garbage = Buffer.alloc(body.length, 0x5a);
      return res.end(garbage);
    }
    if (fault === 'xl') {
      // Only the headers: the loader must refuse before waiting for 6.4 GB.
      res.writeHead(200, { 'Content-Length': XL_FILE_BYTES, 'Content-Type': 'application/octet-stream' });
      res.flushHeaders();
      return undefined;
    }
    res.writeHead(200, { 'Content-Length': body.length });
    return res.end(body);
  };
  server = await startFileServer(files, Object.fromEntries(Object.keys(faults).map((route) => [route, serveWithFault(route)])));
  // Node's http refuses to send a body that disagrees with Content-Length, so mismatches use a raw socket.
  rawServer = createTcpServer((socket) => {
    socket.once('data', (request) => {
      const [, route, name] = /^GET \/([a-z]+)\/(\S+) /.exec(request.toString()) ?? [];
      const body = files[name];
      if (!body) return socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      const fault = name === 'model.safetensors' ? faults[route] : null;
      const declared = fault === 'long' ? body.length + 1000 : fault === 'short' ? body.length - 1000 : body.length;
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${declared}\r\nConnection: close\r\n\r\n`);
      return socket.end(body);
    });
    socket.on('error', () => {});
  });
  await new Promise((resolve) => rawServer.listen(0, '127.0.0.1', resolve));
  baseUrl = server.baseUrl;
  rawUrl = `http://127.0.0.1:${rawServer.address().port}`;
});

afterAll(async () => {
  await server.close();
  await new Promise((resolve) => rawServer.close(resolve));
});

async function generateText(model, prompt, options) {
  let text = '';
  const generation = model.generate(prompt, options);
  for await (const piece of generation) text += piece.text;
  return { text, stats: generation.stats };
}

async function expectWorkingModel(source) {
  const model = await loadModel(source);
  try {
    const { text } = await generateText(model, 'ROMEO:', { maxNewTokens: 4, seed: 1 });
    expect(text.length).toBeGreaterThan(0);
  } finally {
    model.dispose();
  }
}

describe('network faults (Node API)', () => {
  test('Content-Length larger than the body is a network error; the bytes are freed', async () => {
    const heapBefore = engine.heapUsedBytes();
    const error = await loadModel(`${rawUrl}/long/`).catch((e) => e);
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'network' });
    expect(error.message).toMatch(/network error/);
    expect(engine.heapUsedBytes()).toBe(heapBefore);
  });

  test('Content-Length smaller than the body makes a truncated file, reported as invalid, not network', async () => {
    const error = await loadModel(`${rawUrl}/short/`).catch((e) => e);
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'invalid' });
    expect(error.message).not.toMatch(/network/);
  });

  test('a corrupt file is told apart from a network fault', async () => {
    const error = await loadModel(`${baseUrl}/corrupt/`).catch((e) => e);
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'invalid' });
    expect(error.message).toMatch(/corrupt/);
    expect(error.message).not.toMatch(/network/);
  });

  test('after a cut connection, a retry once the fault is gone loads the model', async () => {
    const error = await loadModel(`${baseUrl}/flaky/`).catch((e) => e);
    expect(error).toMatchObject({ kind: 'network', file: 'model.safetensors' });
    faults.flaky = null;
    try {
      await expectWorkingModel(`${baseUrl}/flaky/`);
    } finally {
      faults.flaky = 'cut';
    }
  });

  test('a full storage quota: the model still loads and runs, with one warning, and nothing partial is cached', async () => {
    const stored = new Map();
    let puts = 0;
    globalThis.caches = {
      open: async () => ({
        match: async (url) => (stored.has(url) ? new Response(stored.get(url)) : undefined),
        put: async (url, response) => {
          // The first file fits; the quota runs out on the second.
          if (++puts > 1) {
            await response.body?.cancel();
            throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
          }
          stored.set(url, new Uint8Array(await response.arrayBuffer()));
        },
        delete: async (url) => stored.delete(url),
      }),
    };
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await expectWorkingModel(`${baseUrl}/ok/`);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0][0])).toMatch(/could not cache.*quota/i);
      // Whatever was stored is whole: no file is half written.
      for (const [url, body] of stored) expect(Buffer.from(body).equals(files[url.split('/').at(-1)])).toBe(true);
      // The next load still works (downloading again what the cache did not keep).
      await expectWorkingModel(`${baseUrl}/ok/`);
    } finally {
      warn.mockRestore();
      delete globalThis.caches;
    }
  });

  test('storage that cannot be opened (caches.open rejects): the model loads without caching or warning', async () => {
    globalThis.caches = {
      open: async () => {
        throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
      },
    };
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await expectWorkingModel(`${baseUrl}/ok/`);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      delete globalThis.caches;
    }
  });
});

describe('memory', () => {
  test('a model too large for the wasm heap reports out of memory with the size, then other models load', async () => {
    const heapBefore = engine.heapUsedBytes();
    const error = await loadModel(`${baseUrl}/xl/`).catch((e) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toMatch(/out of memory/);
    expect(error.message).toContain(String(XL_WEIGHT_BYTES));
    expect(error.message).toMatch(/4 GB/);
    expect(engine.heapUsedBytes()).toBe(heapBefore);
    await expectWorkingModel(BUNDLED);
  });

  // A valid header size (100 MB, under the cap) of one array of 50 million small numbers once made the
  // engine abort, killing the model loaded before it.
  test('a 100 MB header of small numbers is an error naming the limit, and the model loaded before keeps working', async () => {
    const before = await loadModel(BUNDLED);
    const dir = mkdtempSync(join(tmpdir(), 'gpt2-huge-header-'));
    try {
      const header = Buffer.alloc(100 * 1024 * 1024 - 9, '0,');  // '0,' from even offsets: {"a":[0,0,...,0]}
      header.write('{"a":[', 0);
      header.write('0]}', header.length - 3);
      const length = Buffer.alloc(8);
      length.writeBigUInt64LE(BigInt(header.length));
      writeFileSync(join(dir, 'model.safetensors'), Buffer.concat([length, header]));
      for (const name of ['config.json', 'vocab.json', 'merges.txt']) writeFileSync(join(dir, name), files[name]);
      const error = await loadModel(dir).catch((e) => e);
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toMatch(/^model\.safetensors: header has more than 5248 values at byte 10498, more than a 4-layer model needs/);
      const { text } = await generateText(before, 'ROMEO:', { maxNewTokens: 4, seed: 1 });
      expect(text.length).toBeGreaterThan(0);
    } finally {
      before.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('400 short generations leave the wasm heap flat and the JS heap bounded', async () => {
    const model = await loadModel(BUNDLED);
    try {
      const run = async (i) => generateText(model, `ROMEO ${i}:`, { maxNewTokens: 2 + (i % 2), seed: i, topAlternatives: i % 3 });
      for (let i = 0; i < 50; i++) await run(i);  // warm-up: session pool, allocator
      global.gc?.();
      const wasmBefore = engine.heapUsedBytes();
      const jsBefore = process.memoryUsage().heapUsed;
      for (let i = 0; i < 400; i++) await run(i);
      global.gc?.();
      expect(engine.heapUsedBytes()).toBe(wasmBefore);
      // Without --expose-gc (node --expose-gc) uncollected garbage blurs the figure, hence the looser bound.
      const growth = process.memoryUsage().heapUsed - jsBefore;
      expect(growth).toBeLessThan(global.gc ? 10e6 : 32e6);
    } finally {
      model.dispose();
    }
  });
});

describe('hostile prompts', () => {
  let model;
  beforeAll(async () => {
    model = await loadModel(BUNDLED);
  });
  afterAll(() => model?.dispose());

  // Text with no spaces is one pre-token for BPE, the worst case for merging; CJK and emoji are multi-byte.
  let seed = 1;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const line = 'ROMEO: But soft, what light through yonder window breaks?\n';
  test.each([
    ['English text', () => line.repeat(Math.ceil(1e6 / line.length)).slice(0, 1e6)],
    ['one letter repeated', () => 'a'.repeat(1e6)],
    ['random letters without a space', () => Array.from({ length: 1e6 }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join('')],
    ['random CJK characters', () => Array.from({ length: 1e6 }, () => String.fromCharCode(0x4e00 + Math.floor(random() * 20000))).join('')],
    ['ZWJ emoji', () => '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}'.repeat(2e5)],
  ])('a prompt of 1 million characters (%s): no throw, the newest n_ctx tokens are kept', async (_, makePrompt) => {
    const prompt = makePrompt();
    expect(prompt.length).toBeGreaterThanOrEqual(1e6);
    const { text, stats } = await generateText(model, prompt, { maxNewTokens: 3, seed: 1 });
    expect(typeof text).toBe('string');
    expect(stats.promptTokens).toBeGreaterThan(model.config.n_ctx);
    expect(stats.contextUsed).toBeLessThanOrEqual(model.config.n_ctx);
    expect(stats.generatedTokens).toBe(3);
  });

  test('a prompt longer than the context generates exactly like its newest n_ctx tokens', async () => {
    const nCtx = model.config.n_ctx;
    const ids = await model.encode('The king is dead. Long live the king! '.repeat(40));
    expect(ids.length).toBeGreaterThan(nCtx);
    const tail = ids.slice(-nCtx);
    const tailText = await model.decode(tail);
    expect(await model.encode(tailText)).toEqual(tail);  // the same tokens, so the same window
    const greedy = { maxNewTokens: 8, temperature: 0 };
    const fromFull = await generateText(model, await model.decode(ids), greedy);
    const fromTail = await generateText(model, tailText, greedy);
    expect(fromFull.stats.promptTokens).toBe(ids.length);
    expect(fromFull.stats.contextUsed).toBeLessThanOrEqual(nCtx);
    expect(fromFull.text.length).toBeGreaterThan(0);
    expect(fromFull.text).toBe(fromTail.text);
  });

  test.each([
    ['lone high surrogate', 'ROMEO \uD800 speaks'],
    ['lone low surrogate', '\uDC00'],
    ['reversed surrogate pair', 'a\uDC00\uD800b'],
    ['NUL characters', 'ROMEO\0:\0\0'],
    ['ZWJ emoji', 'family 👨‍👩‍👧‍👦 and flags 🏳️‍🌈 👩🏽‍💻'],
    ['<|endoftext|> in the text', 'ROMEO:<|endoftext|>JULIET:<|endoftext|>'],
    ['only <|endoftext|>', '<|endoftext|>'],
    ['empty prompt', ''],
    ['control characters and RTL marks', '\u0001\u001b[31m\u202e\u200f\uFEFF\uFFFD\uFFFF'],
  ])('%s: no throw, generates, and encode/decode round-trips where the text is well-formed', async (_, prompt) => {
    const { text, stats } = await generateText(model, prompt, { maxNewTokens: 3, seed: 7, stopAtEndOfText: false });
    expect(typeof text).toBe('string');
    expect(stats.generatedTokens).toBe(3);
    const ids = await model.encode(prompt);
    for (const id of ids) expect(Number.isInteger(id) && id >= 0 && id < model.config.n_vocab).toBe(true);
    // Lone surrogates are not Unicode: they are encoded as U+FFFD (what TextEncoder makes of them).
    const wellFormed = new TextDecoder().decode(new TextEncoder().encode(prompt));
    expect(await model.decode(ids)).toBe(wellFormed);
  });

  test('"<|endoftext|>" in a prompt is ordinary text, not the end-of-text token', async () => {
    const ids = await model.encode('<|endoftext|>');
    expect(ids).not.toContain(50256);
    expect(ids.length).toBeGreaterThan(1);
  });
});
