// The threaded wasm build (public/wasm/gpt2-mt.*, loadModel's `threads` option) in Node: the same logits, bit for
// bit, and the same tokens as the single-thread build, for prefill and steps, fp32 and int8, cached and uncached;
// the option's validation and defaults; models sharing the workers; a Node process using threads exits by itself.
import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { MAX_AUTO_THREADS, MAX_THREADS, resolveThreads } from '../../web/lib/engine/threads.js';
import { loadModel } from '../../web/lib/gpt2.js';

// Starting a threaded engine starts its Web Workers: seconds on a shared machine (npm test runs the end-to-end
// webgpu project beside Jest).
jest.setTimeout(60_000);

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;
const configJson = readFileSync(`${BUNDLED}config.json`, 'utf8');
const weights = new Uint8Array(readFileSync(`${BUNDLED}model.safetensors`));
// 70 tokens: the uncached recomputation splits its batched passes by tokens (at least 32 per thread)
const PROMPT = Array.from({ length: 70 }, (_, i) => (i * 7919 + 13) % 50257);
const STEPS = 24;

// Greedy decoding of PROMPT: every fed position's logits (copied out of the heap) and the tokens.
function trace(engine, { weights: format, useKVCache }) {
  const model = engine.createModel(configJson, weights, { weights: format });
  const session = model.createSession({ useKVCache });
  try {
    session.setSampling({ temperature: 0 });
    const tokens = [session.prefill(PROMPT)];
    const logits = [Float32Array.from(session.logits())];
    while (tokens.length < STEPS) {
      tokens.push(session.step(tokens.at(-1)));
      logits.push(Float32Array.from(session.logits()));
    }
    return { threads: model.threads, tokens, logits };
  } finally {
    session.dispose();
    model.dispose();
  }
}

const bits = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

let single;
beforeAll(async () => {
  single = await loadEngine({ threads: 1, testing: true });  // the testing builds, for session.logits()
});

describe.each([2, 3])('%i threads', (threads) => {
  let threaded;
  beforeAll(async () => {
    threaded = await loadEngine({ threads, testing: true });
  });

  test('the threaded build is used', () => {
    expect(threaded.threads).toBe(threads);
    expect(threaded).not.toBe(single);
  });

  test.each([
    ['fp32', true], ['fp32', false], ['int8', true], ['int8', false],
  ])('%s weights, KV cache %s: bit-identical logits and the same tokens as one thread', (format, useKVCache) => {
    const expected = trace(single, { weights: format, useKVCache });
    const actual = trace(threaded, { weights: format, useKVCache });
    expect(expected.threads).toBe(1);
    expect(actual.threads).toBe(threads);
    expect(actual.tokens).toEqual(expected.tokens);
    actual.logits.forEach((logits, position) => {
      expect({ position, same: bits(logits).equals(bits(expected.logits[position])) }).toEqual({ position, same: true });
    });
  });
});

describe('loadModel threads option', () => {
  const greedyText = async (model) => {
    let text = '';
    for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 30 })) text += piece.text;
    return text;
  };

  test('threads: 2 generates the text of threads: 1, and says how many threads it got', async () => {
    const one = await loadModel(BUNDLED, { threads: 1 });
    const two = await loadModel(BUNDLED, { threads: 2 });
    try {
      expect([one.threads, two.threads]).toEqual([1, 2]);
      expect(await greedyText(two)).toBe(await greedyText(one));
    } finally {
      one.dispose();
      two.dispose();
    }
  });

  test('a model loaded while another holds the workers runs on the threads left; disposing returns them', async () => {
    const engine = await loadEngine({ threads: 2 });
    const heapBefore = engine.heapUsedBytes();
    const first = await loadModel(BUNDLED, { threads: 2 });
    const second = await loadModel(BUNDLED, { threads: 2 });  // the 2-thread engine has one worker, taken
    let third;
    try {
      expect([first.threads, second.threads]).toEqual([2, 1]);
      expect([first.threadsReason, second.threadsReason]).toEqual([null, "the engine's other threads are held by another model"]);
      expect(await greedyText(second)).toBe(await greedyText(first));
      first.dispose();
      third = await loadModel(BUNDLED, { threads: 2 });
      expect(third.threads).toBe(2);
    } finally {
      first.dispose();
      second.dispose();
      third?.dispose();
    }
    // A thread refused costs nothing: the engine does not ask for more threads than the module has workers
    // (Emscripten's failed pthread_create kept the thread's 1 MiB stack).
    expect(engine.heapUsedBytes()).toBe(heapBefore);
  });

  test('Node defaults to one thread; auto is the cores, at most MAX_AUTO_THREADS', async () => {
    const model = await loadModel(BUNDLED);
    try {
      expect(model.threads).toBe(1);
      expect(model.threadsReason).toBeNull();  // one thread was asked for
    } finally {
      model.dispose();
    }
    expect(await resolveThreads('auto')).toBe(Math.min(availableParallelism(), MAX_AUTO_THREADS));
    expect(await resolveThreads(5)).toBe(5);
  });

  test('invalid thread counts are TypeErrors naming the option', async () => {
    for (const threads of [0, -1, 1.5, 17, 256, '2', null]) {
      await expect(loadModel(BUNDLED, { threads })).rejects.toThrow(TypeError);
      await expect(loadModel(BUNDLED, { threads })).rejects.toThrow(/^threads must be "auto" or an integer from 1 to 16, got /);
    }
  });

  test('MAX_THREADS is the limit of the engine, which takes it and refuses one more as an input error', () => {
    const loaderError = (count) => single.call((module) => {
      const loader = new module.ModelLoader(configJson, false, -1, count, 1, null);
      const error = loader.ok() ? null : loader.error();
      loader.delete();
      return error;
    });
    expect(loaderError(MAX_THREADS)).toBe(null);
    expect(loaderError(MAX_THREADS + 1)).toEqual({ kind: 'input', message: `n_threads must be 1..${MAX_THREADS}, got ${MAX_THREADS + 1}` });
  });

  test('a Node process that used threads exits by itself', async () => {
    const { stdout, stderr } = await promisify(execFile)('node',
      [`${ROOT}web/cli/cli.js`, '--threads', '2', '-n', '8', '--temperature', '0', 'ROMEO:'], { encoding: 'utf8', timeout: 60_000 });
    expect(stdout.trim().length).toBeGreaterThan(0);
    expect(stderr).toMatch(/; 2 threads; device: wasm\]/);
  });
});
