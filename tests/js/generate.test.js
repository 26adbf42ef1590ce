// Tests of the generation loop (web/lib/generation/generate.js) and the public API (web/lib/gpt2.js) in Node (the command line's
// are in cli.test.js): a scripted session for exact stop-string and UTF-8 streaming behaviour, the tiny-random
// model with a byte tokenizer stub (its 384-token vocabulary is not GPT-2's), and the bundled tiny-shakespeare
// model.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { Generation, SessionPool, normalizeGenerateOptions } from '../../web/lib/generation/generate.js';
import { loadModel } from '../../web/lib/gpt2.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TINY = `${ROOT}tests/fixtures/tiny-random/`;
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;

jest.setTimeout(60_000);  // uncached runs and command-line processes take seconds on a shared machine

// Test-only tokenizer for models without GPT-2's vocabulary: ids < 256 are bytes, other ids read "<id>".
function byteTokenizer(eosId) {
  const pieceOf = (id) => (id < 256 ? null : `<${id}>`);
  const createDecoder = () => {
    const utf8 = new TextDecoder();
    return {
      push: (id) => (pieceOf(id) === null ? utf8.decode(Uint8Array.of(id), { stream: true }) : utf8.decode() + pieceOf(id)),
      flush: () => utf8.decode(),
    };
  };
  const decode = (ids) => {
    const decoder = createDecoder();
    return ids.map((id) => decoder.push(id)).join('') + decoder.flush();
  };
  return { encode: (text) => Array.from(new TextEncoder().encode(text)), decode, createDecoder, eosId, vocabSize: 384 };
}

// A session that returns a fixed sequence of tokens: prefill gives script[0], each step the next one.
function scriptedTarget(script, eosId = 999) {
  let index = 0;
  const session = {
    setSampling() {},
    prefill: () => script[(index = 0)],
    prefillReusing: () => script[(index = 0)],
    reusedTokens: 0,
    step: () => script[++index],
    distribution: (token) => ({ probability: 0.5, alternatives: [{ token, probability: 0.5 }] }),
    nCached: 1,
    kvCacheBytes: 1024,
  };
  const pool = { acquire: () => session, release() {} };
  return { pool, tokenizer: byteTokenizer(eosId), config: { n_ctx: 1024 } };
}

const bytesOf = (text) => Array.from(new TextEncoder().encode(text));

async function collect(generation) {
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { pieces, text: pieces.map((p) => p.text).join(''), stats: generation.stats };
}

function run(target, prompt, options) {
  return collect(new Generation(target, prompt, normalizeGenerateOptions(options)));
}

describe('generation loop (scripted session)', () => {
  test('streams whole characters only', async () => {
    const text = 'hé😀 ok€';
    const { pieces, text: output, stats } = await run(scriptedTarget([...bytesOf(text), 999]), 'x', { maxNewTokens: 100 });
    expect(output).toBe(text);
    expect(pieces).toHaveLength(bytesOf(text).length);
    for (const piece of pieces) expect(piece.text).not.toMatch(/\uFFFD|[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    expect(stats.stopReason).toBe('eos');
    expect(pieces.map((p) => p.position)).toEqual(pieces.map((_, i) => 1 + i));
  });

  test('a stop string spanning tokens ends generation without being emitted', async () => {
    const target = scriptedTarget([...bytesOf('Hello, world. Bye'), 999]);
    const { text, stats } = await run(target, 'x', { stop: ['world', 'zzz'] });
    expect(text).toBe('Hello, ');
    expect(stats.stopReason).toBe('stop');
    expect((await run(target, 'x', { stop: 'wox' })).text).toBe('Hello, world. Bye');
  });

  test('a stop string inside one token cuts that token\'s text', async () => {
    const { pieces, text } = await run(scriptedTarget([72, 300, 301, 999]), 'x', { stop: '00><3' });
    expect(text).toBe('H<3');
    expect(pieces.map((p) => p.token)).toEqual([72, 300]);
  });

  test('maxNewTokens, stopAtEndOfText: false, and an incomplete character at the end', async () => {
    const target = scriptedTarget([65, 66, 300, 0xe2, 0x82, 67], 300);  // an end-of-text id the tokenizer can decode
    expect((await run(target, 'x', { maxNewTokens: 2 })).stats.stopReason).toBe('length');
    const { text, stats } = await run(target, 'x', { maxNewTokens: 5, stopAtEndOfText: false });
    expect(text).toBe('AB<300>\uFFFD');
    expect(stats).toMatchObject({ stopReason: 'length', generatedTokens: 5 });
  });

  test('an id past the tokenizer\'s vocabulary (a padded model vocabulary) is a piece without text', async () => {
    const { pieces, text } = await run(scriptedTarget([65, 400, 66, 999]), 'x', { topAlternatives: 1 });
    expect(text).toBe('AB');
    expect(pieces[1]).toMatchObject({ token: 400, text: '', alternatives: [{ token: 400, text: '' }] });
  });

  test('topAlternatives adds probabilities and alternative texts', async () => {
    const { pieces } = await run(scriptedTarget([65, 999]), 'x', { topAlternatives: 3 });
    expect(pieces[0]).toMatchObject({ probability: 0.5, alternatives: [{ token: 65, text: 'A', probability: 0.5 }] });
  });

  test('options are validated with errors naming the option', () => {
    const bad = {
      temperature: [NaN, -1, '1'],
      topK: [-1, 1.5],
      topP: [-0.1, 1.1, NaN],
      maxNewTokens: [0, 2.5, -3, Infinity],
      repetitionPenalty: [0, NaN],
      seed: [-1, 0.5],
      stop: [[''], 5],
      topAlternatives: [-1],
      useKVCache: ['yes'],
      kvCache: ['fp16', 8, true],
    };
    for (const [name, values] of Object.entries(bad)) {
      for (const value of values) {
        expect(() => normalizeGenerateOptions({ [name]: value })).toThrow(new RegExp(`option ${name} must be`));
      }
    }
    expect(() => normalizeGenerateOptions({ max_tokens: 5 })).toThrow(/unknown option "max_tokens"/);
    expect(normalizeGenerateOptions({}).seed).toEqual(expect.any(Number));
  });
});

describe('generation loop on the tiny-random wasm model', () => {
  let engine;
  let model;
  let pool;
  beforeAll(async () => {
    engine = await loadEngine();
    model = engine.createModel(readFileSync(`${TINY}config.json`, 'utf8'), new Uint8Array(readFileSync(`${TINY}model.safetensors`)));
    pool = new SessionPool(model);
  });
  afterAll(() => {
    pool.dispose();
    model.dispose();
  });

  const prompt = 'Once upon a time';  // ASCII: its byte ids are valid tiny-random tokens
  // eosId -1: the stub has no end-of-text token (GPT-2's 50256 is not one of tiny-random's 384, which the engine
  // refuses as an end-of-text token)
  const target = (eosId = -1) => ({ pool, tokenizer: byteTokenizer(eosId), config: model.config });
  const promptIds = bytesOf(prompt);

  test('greedy generation follows the engine and reports stats', async () => {
    const { pieces, stats } = await run(target(), prompt, { temperature: 0, maxNewTokens: 20 });
    const session = model.createSession();
    session.setSampling({ temperature: 0 });
    const expected = [session.prefill(promptIds)];
    while (expected.length < 20) expected.push(session.step(expected.at(-1)));
    session.dispose();
    expect(pieces.map((p) => p.token)).toEqual(expected);
    expect(stats).toMatchObject({ promptTokens: promptIds.length, generatedTokens: 20, stopReason: 'length', contextSize: 320 });
    expect(stats.contextUsed).toBe(promptIds.length + 19);
    expect(stats.kvCacheBytes).toBeGreaterThan(0);
    expect(stats.decodeTokensPerSecond).toBeGreaterThan(0);
  });

  test('stops at the end-of-text token, and cached equals uncached', async () => {
    const all = await run(target(), prompt, { temperature: 0, maxNewTokens: 30 });
    const eosId = all.pieces[5].token;
    const { pieces, stats } = await run(target(eosId), prompt, { temperature: 0, maxNewTokens: 30 });
    expect(pieces.map((p) => p.token)).toEqual(all.pieces.slice(0, all.pieces.findIndex((p) => p.token === eosId)).map((p) => p.token));
    expect(stats.stopReason).toBe('eos');
    const uncached = await run(target(), prompt, { seed: 5, maxNewTokens: 30, useKVCache: false });
    const cached = await run(target(), prompt, { seed: 5, maxNewTokens: 30 });
    expect(uncached.pieces.map((p) => p.token)).toEqual(cached.pieces.map((p) => p.token));
  });

  test('the KV cache is int8 unless fp32 is asked for: a quarter of the bytes, and cached equals uncached in both', async () => {
    const { n_layer: L, n_ctx: T, n_embd: C, n_head: H } = model.config;
    const int8 = model.createSession();
    const fp32 = model.createSession({ kvCache: 'fp32' });
    expect([int8.kvCache, fp32.kvCache]).toEqual(['int8', 'fp32']);
    expect(fp32.kvCacheBytes).toBe(2 * L * T * C * 4);
    expect(int8.kvCacheBytes).toBe(2 * L * T * C + 2 * L * H * T * 4);  // int8 rows and a scale per head and position
    int8.dispose();
    fp32.dispose();
    expect(() => model.createSession({ kvCache: 'fp16' })).toThrow('kvCache must be "int8" or "fp32", got "fp16"');

    const tokens = async (options) => (await run(target(), prompt, { temperature: 0, maxNewTokens: 40, ...options })).pieces.map((p) => p.token);
    const fp32Tokens = await tokens({ kvCache: 'fp32' });
    expect(await tokens({ kvCache: 'fp32', useKVCache: false })).toEqual(fp32Tokens);
    const int8Tokens = await tokens({});
    expect(await tokens({ kvCache: 'int8', useKVCache: false })).toEqual(int8Tokens);
    expect(await tokens({ kvCache: 'int8' })).toEqual(int8Tokens);
  });

  test('an AbortSignal ends generation promptly', async () => {
    const controller = new AbortController();
    const generation = new Generation(target(), prompt, normalizeGenerateOptions({ maxNewTokens: 100000, signal: controller.signal }));
    let abortedAt = null;
    const pieces = [];
    for await (const piece of generation) {
      pieces.push(piece);
      if (pieces.length === 3) setTimeout(() => controller.abort((abortedAt = performance.now())), 0);
    }
    // every piece is a token's, except that the bytes of a character cut by the abort (the seed is random) end the
    // stream as one last piece of no token
    for (const piece of pieces.slice(0, -1)) expect(piece.token).toBeGreaterThanOrEqual(0);
    const last = pieces.at(-1);
    if (last.token === null) expect(last).toMatchObject({ position: null, text: expect.stringMatching(/./u) });
    else expect(last.token).toBeGreaterThanOrEqual(0);
    expect(generation.stats.stopReason).toBe('abort');
    expect(performance.now() - abortedAt).toBeLessThan(50);  // the loop yields to the event loop per token
  });

  test('leaving the loop early ends the generation and frees its session', async () => {
    const before = engine.heapUsedBytes();
    const generation = new Generation(target(), prompt, normalizeGenerateOptions({ maxNewTokens: 100 }));
    for await (const piece of generation) if (piece.position > promptIds.length + 2) break;
    expect(generation.stats.stopReason).toBe('abort');
    expect(engine.heapUsedBytes()).toBe(before);  // the session went back to the pool
  });
});

describe('public API on the bundled tiny-shakespeare model', () => {
  let model;
  beforeAll(async () => {
    model = await loadModel(BUNDLED);
  });
  afterAll(() => model?.dispose());

  const tokensOf = ({ pieces }) => pieces.map((p) => p.token);

  test('loads with its config and round-trips text through the tokenizer', async () => {
    expect(model.config.n_vocab).toBeGreaterThanOrEqual(50257);
    expect(model.weightBytes).toBeGreaterThan(0);
    const ids = await model.encode('ROMEO: Good morrow!');
    expect(await model.decode(ids)).toBe('ROMEO: Good morrow!');
  });

  test('seeded generation is reproducible, with or without the KV cache, and decodes to its text', async () => {
    const options = { seed: 42, maxNewTokens: 40, temperature: 0.8, topK: 40 };
    const first = await collect(model.generate('ROMEO:', options));
    const again = await collect(model.generate('ROMEO:', options));
    const uncached = await collect(model.generate('ROMEO:', { ...options, useKVCache: false }));
    expect(tokensOf(again)).toEqual(tokensOf(first));
    expect(tokensOf(uncached)).toEqual(tokensOf(first));
    if (first.stats.stopReason === 'length') expect(first.pieces).toHaveLength(40);
    expect(first.text).toBe(await model.decode(tokensOf(first)));
    expect(first.stats).toMatchObject({ promptTokens: (await model.encode('ROMEO:')).length, contextSize: model.config.n_ctx });
  });

  test('a prompt of token ids generates as its text does; a prompt of anything else is a TypeError', async () => {
    const options = { seed: 42, maxNewTokens: 20, temperature: 0.8, topK: 40 };
    const fromText = await collect(model.generate('ROMEO:', options));
    const fromIds = await collect(model.generate(await model.encode('ROMEO:'), options));
    expect(tokensOf(fromIds)).toEqual(tokensOf(fromText));
    expect(() => model.generate([1, 2.5], options)).toThrow(
      'generate: prompt must be a string or an array of token ids, got an array with a value that is not an integer');
    expect(() => model.generate(42, options)).toThrow('generate: prompt must be a string or an array of token ids, got number');
  });

  test('maxNewTokens bounds the output; greedy output reaches it', async () => {
    const { pieces, stats } = await collect(model.generate('First Citizen:', { temperature: 0, maxNewTokens: 7, stopAtEndOfText: false }));
    expect(pieces).toHaveLength(7);
    expect(stats).toMatchObject({ generatedTokens: 7, stopReason: 'length' });
  });

  test('a stop string ends generation before it', async () => {
    const options = { temperature: 0, maxNewTokens: 60, stopAtEndOfText: false };
    const full = (await collect(model.generate('KING:', options))).text;
    const stop = full.slice(20, 24);
    const expected = full.slice(0, full.indexOf(stop));
    const { text, stats } = await collect(model.generate('KING:', { ...options, stop: [stop] }));
    expect(text).toBe(expected);
    expect(stats.stopReason).toBe('stop');
  });

  test('an empty prompt starts from <|endoftext|>; topAlternatives gives probabilities', async () => {
    const { pieces, stats } = await collect(model.generate('', { maxNewTokens: 5, topAlternatives: 3, seed: 1 }));
    expect(stats.promptTokens).toBe(1);
    for (const piece of pieces) {
      expect(piece.probability).toBeGreaterThan(0);
      expect(piece.probability).toBeLessThanOrEqual(1);
      expect(piece.alternatives).toHaveLength(3);
      expect(piece.alternatives[0]).toEqual({ token: expect.any(Number), text: expect.any(String), probability: expect.any(Number) });
    }
  });

  test('abort ends generation promptly with stopReason abort', async () => {
    const controller = new AbortController();
    const generation = model.generate('HAMLET:', { maxNewTokens: 5000, stopAtEndOfText: false, signal: controller.signal });
    let count = 0;
    for await (const _ of generation) if (++count === 5) controller.abort();
    expect(count).toBe(5);
    expect(generation.stats.stopReason).toBe('abort');
  });

  test('invalid options throw naming the option', () => {
    expect(() => model.generate('x', { temperature: NaN })).toThrow(/option temperature/);
    expect(() => model.generate('x', { topP: -1 })).toThrow(/option topP/);
    expect(() => model.generate(5)).toThrow(/prompt must be a string/);
  });

  test('topP 0 keeps only the most likely token: the greedy text whatever the temperature and seed', async () => {
    const options = { maxNewTokens: 30, stopAtEndOfText: false };
    const greedy = await collect(model.generate('ROMEO:', { ...options, temperature: 0 }));
    for (const seed of [1, 2]) {
      const nucleus = await collect(model.generate('ROMEO:', { ...options, temperature: 1.5, topP: 0, seed }));
      expect(nucleus.text).toBe(greedy.text);
    }
  });
});

// dispose() during a run ends it as an abort of its signal does: before its next token (a step of several sequences,
// a step of the beams), with stopReason 'abort' and no error; a beam search gives its running beams. The model's other
// calls then fail, and a run that had not started takes no session.
describe('dispose() during a run (a model in this thread)', () => {
  const LONG = { maxNewTokens: 200, stopAtEndOfText: false, temperature: 0 };

  test.each([
    ['one sequence', {}, 5],
    ['speculative decoding', { speculative: { draft: 'prompt-lookup' } }, 5],
    ['several sequences, at the end of a step of three', { numReturnSequences: 3, temperature: 0.8, seed: 3 }, 3],
  ])('%s: the run ends at its next token, with stopReason abort and no error', async (label, options, disposeAfter) => {
    const model = await loadModel(BUNDLED);
    const generation = model.generate('HAMLET:', { ...LONG, ...options });
    let count = 0;
    for await (const _ of generation) if (++count === disposeAfter) model.dispose();
    expect(count).toBe(disposeAfter);
    expect(generation.stats).toMatchObject({ stopReason: 'abort', generatedTokens: disposeAfter });
    expect(() => model.generate('HAMLET:')).toThrow('the model was disposed');
  });

  test('a beam search ends at its next step and gives its running beams', async () => {
    const model = await loadModel(BUNDLED);
    const generation = model.generate('HAMLET:', { ...LONG, numBeams: 3 });
    const iterator = generation[Symbol.asyncIterator]();
    const first = iterator.next();  // the search runs, a turn of the event loop between its steps
    await new Promise((resolve) => setTimeout(resolve, 20));
    model.dispose();
    const pieces = [];
    for (let next = await first; !next.done; next = await iterator.next()) pieces.push(next.value);
    expect(generation.stats.stopReason).toBe('abort');
    expect(pieces.length).toBeGreaterThan(0);
    expect(pieces.length).toBeLessThan(200);
    expect(generation.sequences[0].stopReason).toBe('abort');
  });

  test('a run not started yet ends at once, and the signal of the caller still counts', async () => {
    const model = await loadModel(BUNDLED);
    const pending = model.generate('HAMLET:', LONG);
    const controller = new AbortController();
    const withSignal = model.generate('HAMLET:', { ...LONG, signal: controller.signal });
    let count = 0;
    for await (const _ of withSignal) if (++count === 4) controller.abort();
    expect(count).toBe(4);
    expect(withSignal.stats.stopReason).toBe('abort');
    model.dispose();
    expect(await collect(pending)).toMatchObject({ pieces: [], stats: { stopReason: 'abort', generatedTokens: 0 } });
  });
});
