// The streaming load path in the wasm engine (Engine.createModelLoader, web/lib/engine/engine.js) and through the loader
// (web/lib/loading/loader.js) from in-memory streams: any chunking gives the whole-buffer model bit for bit, the heap never
// holds the file (only the weights and a small staging block), and errors and aborts mid-stream leave nothing
// allocated.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { ModelLoadError } from '../../web/lib/errors.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const configJson = readFileSync(`${TINY}config.json`, 'utf8');
const weights = new Uint8Array(readFileSync(`${TINY}model.safetensors`));
const greedy = JSON.parse(readFileSync(`${TINY}greedy.json`, 'utf8'));
const STAGING_BYTES = 4 << 20;  // web/lib/engine/engine.js

let engine;
beforeAll(async () => {
  engine = await loadEngine({ testing: true });  // for session.logits()
});

// Pieces of bytes: 'one' byte each, 'random' sizes (seeded), or the 'whole' file.
function* pieces(bytes, chunking, seed = 1) {
  let state = seed;
  const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let offset = 0; offset < bytes.length;) {
    const n = chunking === 'one' ? 1 : chunking === 'random' ? 1 + Math.floor(random() * 70000) : bytes.length;
    yield bytes.subarray(offset, offset + n);
    offset += n;
  }
}

function streamModel(bytes, chunking, options = {}) {
  const loader = engine.createModelLoader(configJson, options);
  try {
    for (const piece of pieces(bytes, chunking)) loader.feed(piece);
    return loader.finish();
  } finally {
    loader.dispose();
  }
}

// Greedy ids and the last logits of the fixture's greedy prompt.
function run(model) {
  const session = model.createSession();
  try {
    session.setSampling({ temperature: 0 });
    const ids = [session.prefill(greedy.prompt)];
    while (ids.length < 12) ids.push(session.step(ids.at(-1)));
    return { ids, logits: Array.from(session.logits()) };
  } finally {
    session.dispose();
  }
}

describe('EngineModelLoader', () => {
  test.each([['fp32'], ['int8']])('1-byte, random and whole chunkings give the whole-buffer model (%s)', (format) => {
    const whole = engine.createModel(configJson, weights, { weights: format });
    const expected = run(whole);
    whole.dispose();
    if (format === 'fp32') expect(expected.ids).toEqual(greedy.generated.slice(0, 12));
    for (const chunking of ['one', 'random', 'whole']) {
      const model = streamModel(weights, chunking, { weights: format });
      expect(run(model)).toEqual(expected);
      model.dispose();
    }
  });

  test('the heap holds the weights and the staging block, never the file', () => {
    const bundled = new Uint8Array(readFileSync(`${BUNDLED}model.safetensors`));
    const before = engine.heapUsedBytes();
    let peak = 0;
    const loader = engine.createModelLoader(readFileSync(`${BUNDLED}config.json`, 'utf8'));
    for (const piece of pieces(bundled, 'random')) {
      loader.feed(piece);
      peak = Math.max(peak, engine.heapUsedBytes() - before);
    }
    const model = loader.finish();
    loader.dispose();
    // 46 MB of fp32 weights (from a 23 MB F16 file), 4 MiB of staging, the parsed header and a few rows of
    // conversion buffers; loading from a buffer of the whole file needed file + weights
    expect(peak).toBeLessThan(model.weightBytes + STAGING_BYTES + (1 << 20));
    expect(engine.heapUsedBytes() - before).toBeLessThan(model.weightBytes + (64 << 10));
    model.dispose();
    expect(engine.heapUsedBytes()).toBe(before);
  });

  test('a truncated or corrupt stream names the problem and frees everything', () => {
    const before = engine.heapUsedBytes();
    expect(() => streamModel(weights.subarray(0, 300000), 'random')).toThrow(
      /^model\.safetensors: the file is truncated: it ends \d+ bytes into the data section, inside tensor '[^']+' \(bytes \[\d+, \d+\)\)$/);
    const corrupt = weights.slice();
    corrupt.fill(0x41, 100, 120);  // inside the JSON header
    expect(() => streamModel(corrupt, 'one')).toThrow(/^model\.safetensors: header is not valid JSON/);
    expect(() => streamModel(weights, 'random', { fileSize: weights.length - 1 })).toThrow(/^model\.safetensors: /);
    expect(() => engine.createModelLoader('{"vocab_size": 384,')).toThrow(/^config\.json: not valid JSON/);
    expect(engine.heapUsedBytes()).toBe(before);
  });

  test('weights over 2 GB (one array in wasm32) are refused from config.json alone; as int8 they are tried', () => {
    const shape = (n_layer, n_head, n_embd) => JSON.stringify({ vocab_size: 50257, n_positions: 1024, n_embd, n_head, n_layer });
    const large = shape(36, 20, 1280);  // GPT-2 774M
    const xl = shape(48, 25, 1600);     // GPT-2 1.5B
    expect(() => engine.createModelLoader(large)).toThrow('out of memory: need 3096120320 bytes for the weights');
    expect(() => engine.createModelLoader(xl)).toThrow('out of memory: need 6230444800 bytes for the weights');
    engine.createModelLoader(large, { weights: 'int8' }).dispose();  // about 0.8 GB
    engine.createModelLoader(xl, { weights: 'int8' }).dispose();     // about 1.6 GB
  });

  test('the binding\'s own failures are the loader\'s error: a staging block that cannot be allocated, a piece larger than it', () => {
    const before = engine.heapUsedBytes();
    const loaderState = (stagingBytes, feedBytes = null) => engine.call((module) => {
      const loader = new module.ModelLoader(configJson, false, -1, 1, stagingBytes, null);
      const fed = feedBytes === null ? null : loader.feed(feedBytes);
      const state = { ok: loader.ok(), fed, error: loader.error() };
      loader.delete();
      return state;
    });
    expect(loaderState(8)).toEqual({ ok: true, fed: null, error: { kind: '', message: '' } });
    expect(loaderState(5e9)).toEqual({ ok: false, fed: null,
      error: { kind: 'memory', message: 'out of memory: need 5000000000 bytes for the loader\'s staging block' } });
    expect(loaderState(8, 9)).toEqual({ ok: false, fed: false,
      error: { kind: 'input', message: 'feed: 9.000000 bytes do not fit the 8-byte staging block' } });
    expect(engine.heapUsedBytes()).toBe(before);
  });
});

describe('EngineModelLoader with onMatrixRows (a GPU upload)', () => {
  const MATRICES = [[-1, 'wte'], ...[0, 1].flatMap((l) => ['attn_qkv', 'attn_proj', 'mlp_fc', 'mlp_proj'].map((name) => [l, name]))];

  // -> { model, received: 'layer name' -> { rows: Uint8Array of the whole matrix, scale, arrivals } } of a load
  // whose matrices went to onMatrixRows, fed in random pieces
  function streamToReceiver(bytes, format) {
    const received = new Map();
    const onMatrixRows = ({ layer, name, nOut, row0, nRows, rows, scale }) => {
      const key = `${layer} ${name}`;
      const rowBytes = rows.byteLength / nRows;
      if (!received.has(key)) received.set(key, { rows: new Uint8Array(nOut * rowBytes), scale: scale && new Float32Array(nOut), arrivals: 0 });
      const matrix = received.get(key);
      matrix.rows.set(new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength), row0 * rowBytes);
      matrix.scale?.set(scale, row0);
      matrix.arrivals += nRows;
    };
    const loader = engine.createModelLoader(configJson, { weights: format, onMatrixRows });
    try {
      for (const piece of pieces(bytes, 'random')) loader.feed(piece);
      return { model: loader.finish(), received };
    } finally {
      loader.dispose();
    }
  }

  test.each([['fp32'], ['int8']])('every row of every matrix arrives once, as the model that keeps them reads it back (%s)', (format) => {
    const kept = engine.createModel(configJson, weights, { weights: format });
    const { model, received } = streamToReceiver(weights, format);
    expect([...received.keys()].sort()).toEqual(MATRICES.map(([l, name]) => `${l} ${name}`).sort());
    for (const [layer, name] of MATRICES) {
      const { rows, scale, arrivals } = received.get(`${layer} ${name}`);
      const expected = kept.call((m) => {
        const { nOut, scale: keptScale } = m.matrix(layer, name);
        const keptRows = m.matrixRows(layer, name, 0, nOut);
        return { nOut, rows: new Uint8Array(keptRows.buffer, keptRows.byteOffset, keptRows.byteLength).slice(), scale: keptScale?.slice() ?? null };
      });
      expect(arrivals).toBe(expected.nOut);
      expect(Buffer.from(rows).equals(Buffer.from(expected.rows))).toBe(true);
      expect(scale).toEqual(expected.scale);
    }
    expect(model.weightBytes).toBeLessThan(kept.weightBytes);  // the vectors alone (wpe is most of them here)
    expect(() => model.createSession()).toThrow("the model's weights were released (a GPU holds them): only a recording session runs it");
    model.dispose();
    kept.dispose();
  });

  test('the heap never holds the matrices: the bundled model streams through at most the staging block and a matrix', () => {
    const bundled = new Uint8Array(readFileSync(`${BUNDLED}model.safetensors`));
    const before = engine.heapUsedBytes();
    let peak = 0;
    let receivedBytes = 0;
    const loader = engine.createModelLoader(readFileSync(`${BUNDLED}config.json`, 'utf8'), {
      onMatrixRows: ({ rows }) => {
        peak = Math.max(peak, engine.heapUsedBytes() - before);
        receivedBytes += rows.byteLength;
      },
    });
    for (const piece of pieces(bundled, 'random')) {
      loader.feed(piece);
      peak = Math.max(peak, engine.heapUsedBytes() - before);
    }
    const model = loader.finish();
    loader.dispose();
    // 45.7 MB of matrices went by; the heap held the staging block, one Conv1D matrix (768 x 192 floats,
    // transposed), a few rows and the vectors (0.24 MB)
    console.log(`bundled model with onMatrixRows: ${receivedBytes} bytes of matrices handed over, heap peak ${peak} bytes, ${model.weightBytes} kept`);
    expect(receivedBytes).toBeGreaterThan(45e6);
    expect(peak).toBeLessThan(STAGING_BYTES + (2 << 20));
    model.dispose();
    expect(engine.heapUsedBytes()).toBe(before);
  });

  test('what onMatrixRows throws stops the load, unchanged, and frees everything', () => {
    const before = engine.heapUsedBytes();
    const refusal = new Error("device 'webgpu': no room");
    const loader = engine.createModelLoader(configJson, { onMatrixRows: ({ name }) => { if (name === 'mlp_fc') throw refusal; } });
    let thrown = null;
    try {
      for (const piece of pieces(weights, 'random')) loader.feed(piece);
    } catch (error) {
      thrown = error;
    }
    loader.dispose();
    expect(thrown).toBe(refusal);
    expect(engine.heapUsedBytes()).toBe(before);
  });

  test('GPT-2 1.5B in fp32, over the heap\'s 2 GB array alone, is taken when its matrices go elsewhere', () => {
    const xl = JSON.stringify({ vocab_size: 50257, n_positions: 1024, n_embd: 1600, n_head: 25, n_layer: 48 });
    expect(() => engine.createModelLoader(xl)).toThrow('out of memory: need 6230444800 bytes for the weights');
    engine.createModelLoader(xl, { onMatrixRows: () => {} }).dispose();
  });
});

describe('loadModelIntoEngine from streams', () => {
  // A Blob whose stream() delivers the file in the given pieces, like a slow network or disk.
  // failAfter: bytes after which the read fails; abortAfter: bytes after which `abort` is called (a user cancel).
  function chunkedBlob(bytes, chunking, { failAfter = Infinity, abortAfter = Infinity, abort } = {}) {
    return {
      size: bytes.length,
      name: 'model.safetensors',
      stream: () => {
        const iterator = pieces(bytes, chunking);
        let sent = 0;
        return new ReadableStream({
          pull(controller) {
            if (sent >= failAfter) return controller.error(new Error('disk unplugged'));
            if (sent >= abortAfter) abort();
            const { done, value } = iterator.next();
            if (done) return controller.close();
            sent += value.length;
            return controller.enqueue(value.slice());
          },
        });
      },
    };
  }
  // source_files.js recognizes Blobs with instanceof: give the stand-in Blob's prototype.
  const asBlob = (object) => Object.setPrototypeOf(object, Blob.prototype);

  test('a local file streamed in small pieces loads, with progress', async () => {
    const events = [];
    const { model } = await loadModelIntoEngine(engine, modelSource({ config: configJson, weights: asBlob(chunkedBlob(weights, 'random')) }),
      { withTokenizer: false, onProgress: (event) => events.push(event) });
    expect(run(model).ids).toEqual(greedy.generated.slice(0, 12));
    model.dispose();
    expect(events.at(-1)).toMatchObject({ file: 'model.safetensors', loaded: weights.length, total: weights.length, fraction: 1 });
  });

  test('a read error mid-file is a network error; an abort mid-file is an AbortError; nothing stays allocated', async () => {
    const before = engine.heapUsedBytes();
    const failing = asBlob(chunkedBlob(weights, 'random', { failAfter: 200000 }));
    const error = await loadModelIntoEngine(engine, modelSource({ config: configJson, weights: failing }), { withTokenizer: false }).catch((e) => e);
    expect(error).toBeInstanceOf(ModelLoadError);
    expect(error).toMatchObject({ file: 'model.safetensors', kind: 'network' });
    expect(error.message).toMatch(/disk unplugged/);

    const controller = new AbortController();
    const cancelled = asBlob(chunkedBlob(weights, 'random', { abortAfter: 100000, abort: () => controller.abort() }));
    const aborted = await loadModelIntoEngine(engine, modelSource({ config: configJson, weights: cancelled }),
      { withTokenizer: false, signal: controller.signal }).catch((e) => e);
    expect(aborted.name).toBe('AbortError');
    expect(engine.heapUsedBytes()).toBe(before);
  });
});
