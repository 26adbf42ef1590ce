// Tests of KV-cache reuse between generate() calls and of model.score() (web/lib/generation/generate.js, web/lib/generation/score.js,
// web/lib/engine/engine.js) on the bundled tiny-shakespeare model in Node: a run that reuses the previous run's cache gives
// the tokens of a fresh run, and scores equal the native tool's (`gpt2 --score`, `gpt2 --eval`).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { EngineError } from '../../web/lib/errors.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { ReferenceGpt2 } from './reference_gpt2.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;
const NATIVE_TOOL = `${ROOT}build/native/gpt2`;
const END_OF_TEXT = 50256;
// The native build's logits differ from the wasm build's by up to about 1e-4 (other SIMD kernels, another order
// of float sums; engine.test.js bounds the GGUF case the same way): measured up to 8e-5 on a token's logprob,
// which averages out to under 1e-6 in the mean over a long text.
const NATIVE_LOGPROB_TOLERANCE = 2e-4;
const NATIVE_MEAN_TOLERANCE = 1e-5;

jest.setTimeout(120_000);  // each test generates several hundred tokens on a shared machine

let model;
beforeAll(async () => {
  model = await loadModel(BUNDLED);
});
afterAll(() => model?.dispose());

async function run(prompt, options) {
  const generation = model.generate(prompt, options);
  let text = '';
  const tokens = [];
  for await (const piece of generation) {
    text += piece.text;
    tokens.push(piece.token);
  }
  return { text, tokens, stats: generation.stats };
}

// A run whose session's window holds only <|endoftext|>, which no encoded prompt starts with: nothing to reuse.
async function freshRun(prompt, options) {
  await run('', { ...options, maxNewTokens: 1 });
  const fresh = await run(prompt, options);
  expect(fresh.stats.reusedTokens).toBe(0);
  return fresh;
}

// Generates from prompt, then continues the text (prompt + output): -> the continuation and a fresh run of it.
async function continueAndCompare(prompt, options, continueOptions = options) {
  const first = await run(prompt, options);
  const text = prompt + first.text;
  const continued = await run(text, continueOptions);
  const fresh = await freshRun(text, continueOptions);
  return { first, continued, fresh };
}

describe('KV-cache reuse between generate() calls', () => {
  const sampling = { temperature: 0.9, topK: 40, repetitionPenalty: 1.2, seed: 7, stopAtEndOfText: false };

  test.each(['int8', 'fp32'])('continuing a greedy text reuses its tokens and gives the fresh run\'s tokens (%s KV cache)', async (kvCache) => {
    const options = { temperature: 0, maxNewTokens: 40, stopAtEndOfText: false, kvCache };
    const { first, continued, fresh } = await continueAndCompare('ROMEO:', options);
    // greedy output encodes back to the ids that were generated: all of them but the last are reused
    expect(continued.stats.reusedTokens).toBe(first.stats.promptTokens + first.tokens.length - 1);
    expect(continued.tokens).toEqual(fresh.tokens);
    expect(continued.text).toBe(fresh.text);
  });

  test.each(['int8', 'fp32'])('continuing a sampled text gives the fresh run\'s tokens (%s KV cache)', async (kvCache) => {
    const { continued, fresh } = await continueAndCompare('KING RICHARD II:', { ...sampling, maxNewTokens: 60, kvCache });
    expect(continued.stats.reusedTokens).toBeGreaterThan(0);
    expect(continued.tokens).toEqual(fresh.tokens);
  });

  test('the same prompt again reuses all its tokens but the last, which is fed for its logits', async () => {
    const options = { ...sampling, maxNewTokens: 20 };
    const first = await run('First Citizen:\nWe are accounted poor citizens', options);
    const again = await run('First Citizen:\nWe are accounted poor citizens', options);
    expect(again.stats.reusedTokens).toBe(first.stats.promptTokens - 1);
    expect(again.tokens).toEqual(first.tokens);
  });

  test('an unrelated prompt reuses nothing; without the KV cache nothing is reused', async () => {
    await run('ROMEO:', { maxNewTokens: 10, seed: 1 });
    expect((await run('JULIET:', { maxNewTokens: 10, seed: 1 })).stats.reusedTokens).toBe(0);
    await run('ROMEO:', { maxNewTokens: 10, seed: 1, useKVCache: false });
    expect((await run('ROMEO:', { maxNewTokens: 10, seed: 1, useKVCache: false })).stats.reusedTokens).toBe(0);
  });

  test.each(['int8', 'fp32'])('across a window slide: a run past n_ctx, then its continuation, gives the fresh run\'s tokens (%s)', async (kvCache) => {
    const { n_ctx: contextSize } = model.config;
    const long = { ...sampling, maxNewTokens: contextSize + 40, kvCache };
    const { first, continued, fresh } = await continueAndCompare('HAMLET:', long, { ...sampling, maxNewTokens: 30, kvCache });
    expect(first.tokens).toHaveLength(contextSize + 40);  // the window slid during the first run
    expect(continued.tokens).toEqual(fresh.tokens);
  });

  test('across a window slide: a continuation that reuses the cache and then slides gives the fresh run\'s tokens', async () => {
    const { n_ctx: contextSize } = model.config;
    const options = { temperature: 0, maxNewTokens: contextSize / 2, stopAtEndOfText: false };
    const { continued, fresh } = await continueAndCompare('ROMEO:', options);
    expect(continued.stats.reusedTokens).toBeGreaterThan(contextSize / 4);
    expect(continued.stats.promptTokens + options.maxNewTokens).toBeGreaterThan(contextSize);  // it slid
    expect(continued.tokens).toEqual(fresh.tokens);
  });
});

function native(args) {
  return execFileSync(NATIVE_TOOL, ['--model', BUNDLED, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

// `gpt2 --score --ids`: "position<TAB>token<TAB>logprob<TAB>rank" lines, then "total <sum> perplexity <p>".
function nativeScores(ids) {
  const lines = native(['--score', '--ids', ids.join(',')]).trim().split('\n');
  const [, total, perplexity] = lines.pop().match(/^total (\S+) perplexity (\S+)$/);
  const tokens = lines.map((line) => {
    const [, token, logprob, rank] = line.split('\t');
    return { token: Number(token), logprob: Number(logprob), rank: Number(rank) };
  });
  return { tokens, total: Number(total), perplexity: Number(perplexity) };
}

// `gpt2 --eval FILE.u16` over ids: the mean of -logprob over ids[1..].
function nativeEval(ids) {
  const dir = mkdtempSync(`${tmpdir()}/gpt2-wasm-score-`);
  try {
    writeFileSync(`${dir}/ids.u16`, new Uint8Array(Uint16Array.from(ids).buffer));
    return Number(native(['--eval', `${dir}/ids.u16`]).match(/^eval: (\S+) nats\/token/)[1]);
  } finally {
    rmSync(dir, { recursive: true });
  }
}

describe('EngineSession.prefillReusing and score', () => {
  test('bad arguments throw the engine\'s one-line errors, and the session still works after them', async () => {
    const engine = await loadEngine();
    const engineModel = engine.createModel(readFileSync(`${BUNDLED}config.json`, 'utf8'), readFileSync(`${BUNDLED}model.safetensors`));
    const session = engineModel.createSession();
    try {
      expect(() => session.prefillReusing([])).toThrow('prefillReusing: no token ids given');
      expect(() => session.prefillReusing([1.5])).toThrow('token id must be an integer, got 1.5');
      expect(() => session.score([END_OF_TEXT])).toThrow(new EngineError({ kind: 'input', message: 'score: needs at least 2 tokens, got 1' }));
      expect(() => session.score([END_OF_TEXT, 1], 50258)).toThrow('score: top_k 50258 out of range [0, 50257]');
      // One that would overflow the size of the alternatives' buffer: refused by the engine, not an abort.
      expect(() => session.score([END_OF_TEXT, 1, 2, 3], 2 ** 40)).toThrow('score: top_k 2147483647 out of range [0, 50257]');
      expect(() => session.score([END_OF_TEXT, 1], -1)).toThrow('score: topK must be an integer >= 0, got -1');
      const { logprobs, ranks, alternatives } = session.score([END_OF_TEXT, 464, 3290], 2);
      expect([logprobs.length, ranks.length, alternatives.map((row) => row.length)]).toEqual([2, 2, [4, 4]]);
      session.prefillReusing([END_OF_TEXT, 464, 3290, 11]);
      expect(session.reusedTokens).toBe(3);  // the scored window, kept
    } finally {
      session.dispose();
      engineModel.dispose();
    }
  });
});

describe('model.score', () => {
  const TEXT = 'ROMEO:\nBut soft, what light through yonder window breaks? It is the east, and Juliet is the sun.';

  test('each token of the text gets the native tool\'s logprob and rank, and the texts join to the text', async () => {
    const ids = await model.encode(TEXT);
    const { tokens, totalLogprob, perplexity } = await model.score(TEXT);
    const expected = nativeScores([END_OF_TEXT, ...ids]);
    expect(tokens.map((t) => t.token)).toEqual(ids);
    expect(tokens.map((t) => t.rank)).toEqual(expected.tokens.map((t) => t.rank));
    tokens.forEach((token, i) => expect(Math.abs(token.logprob - expected.tokens[i].logprob)).toBeLessThan(NATIVE_LOGPROB_TOLERANCE));
    expect(Math.abs(totalLogprob / ids.length - expected.total / ids.length)).toBeLessThan(NATIVE_MEAN_TOLERANCE);
    expect(perplexity).toBeCloseTo(Math.exp(-totalLogprob / ids.length), 12);
    expect(tokens.map((t) => t.text).join('')).toBe(TEXT);
  });

  test('alternatives: the likeliest tokens, likeliest first, with their texts; the token itself among them when its rank allows', async () => {
    const { tokens } = await model.score(TEXT, { topAlternatives: 5 });
    for (const { token, logprob, rank, alternatives } of tokens) {
      expect(alternatives).toHaveLength(5);
      for (let k = 1; k < 5; k++) expect(alternatives[k].logprob).toBeLessThanOrEqual(alternatives[k - 1].logprob);
      if (rank <= 5) expect(alternatives[rank - 1]).toEqual({ token, text: await model.decode([token]), logprob });
      else expect(alternatives[4].logprob).toBeGreaterThanOrEqual(logprob);
    }
    expect((await model.score(TEXT)).tokens[0].alternatives).toEqual([]);
  });

  test('as many alternatives as the vocabulary holds is every token, likeliest first; more are refused', async () => {
    const nVocab = model.config.n_vocab;
    const { tokens } = await model.score('ROMEO:', { topAlternatives: nVocab });
    for (const { alternatives } of tokens) {
      expect(alternatives).toHaveLength(nVocab);
      expect(new Set(alternatives.map((a) => a.token)).size).toBe(nVocab);
    }
    expect((await model.score('ROMEO:', { topAlternatives: 3 })).tokens.map((t) => t.alternatives))
      .toEqual(tokens.map((t) => t.alternatives.slice(0, 3)));
    await expect(model.score('ROMEO:', { topAlternatives: nVocab + 1 })).rejects
      .toThrow(`score: option topAlternatives must be at most the model's vocabulary (${nVocab} tokens), got ${nVocab + 1}`);
    // generate() too: a number that would wrap on its way into the engine (2^32 + 1 becomes 1) is refused.
    expect(() => model.generate('ROMEO:', { maxNewTokens: 1, topAlternatives: 2 ** 32 + 1 }))
      .toThrow('generate: option topAlternatives must be an integer in [0, 2147483647], got 4294967297');
    for await (const piece of model.generate('ROMEO:', { maxNewTokens: 1, topAlternatives: nVocab })) {
      expect(piece.alternatives).toHaveLength(nVocab);
    }
  });

  test('a score of more alternatives in all than one score returns is refused before it runs', async () => {
    // 'ROMEO: ' x 60 is 180 tokens: 180 x 50257 alternatives are more than 4,194,304
    const text = 'ROMEO: '.repeat(60);
    const n = (await model.encode(text)).length;
    await expect(model.score(text, { topAlternatives: model.config.n_vocab })).rejects
      .toThrow(`score: option topAlternatives ${model.config.n_vocab} for ${n} scored tokens asks for ${n * model.config.n_vocab} alternatives, more than 4194304 (the most one score returns)`);
    expect((await model.score(text, { topAlternatives: 5 })).tokens).toHaveLength(n);
  });

  test('kvCache: \'fp32\' scores a text the model never saw within 1e-4 of a float64 reference; the default int8 cache within 1e-2', async () => {
    const heldOut = readFileSync(`${ROOT}tests/fixtures/tinyshakespeare-held-out.u16`);
    const text = await model.decode(Array.from({ length: 48 }, (_, i) => heldOut.readUInt16LE(2 * i)));
    const ids = [END_OF_TEXT, ...await model.encode(text)];
    const reference = new ReferenceGpt2(BUNDLED).logprobs(ids);
    const maxDifference = ({ tokens }) => Math.max(...tokens.map((token, i) => Math.abs(token.logprob - reference[i][ids[i + 1]])));
    const exact = maxDifference(await model.score(text, { kvCache: 'fp32' }));
    const compact = maxDifference(await model.score(text));
    console.log(`bundled model, ${ids.length - 1} tokens: max |logprob - float64 reference| = ${exact.toExponential(2)} (fp32 KV cache), ${compact.toExponential(2)} (int8)`);
    expect(exact).toBeLessThan(1e-4);
    expect(compact).toBeLessThan(1e-2);
    expect(compact).toBeGreaterThan(exact);
    await expect(model.score(text, { kvCache: 'fp16' })).rejects.toThrow('score: option kvCache must be "int8" or "fp32", got "fp16"');
  });

  test('a text longer than the context is scored in overlapping windows: the perplexity of `gpt2 --eval` on the same ids', async () => {
    const text = `${TEXT} ${TEXT.repeat(24)}`;
    const ids = await model.encode(text);
    expect(ids.length).toBeGreaterThan(2 * model.config.n_ctx);
    const { tokens, totalLogprob, perplexity } = await model.score(text);
    expect(tokens).toHaveLength(ids.length);
    const meanNats = nativeEval([END_OF_TEXT, ...ids]);
    expect(Math.abs(-totalLogprob / ids.length - meanNats)).toBeLessThan(NATIVE_MEAN_TOLERANCE);
    expect(Math.log(perplexity)).toBeCloseTo(-totalLogprob / ids.length, 12);
  });

  test('an empty text has no tokens and perplexity 1; bad arguments throw naming them', async () => {
    expect(await model.score('')).toEqual({ tokens: [], totalLogprob: 0, perplexity: 1 });
    await expect(model.score(5)).rejects.toThrow('score: text must be a string, got number');
    await expect(model.score('x', { top: 5 })).rejects.toThrow('score: unknown option "top"');
    await expect(model.score('x', { topAlternatives: -1 })).rejects.toThrow('score: option topAlternatives must be an integer in [0, 2147483647], got -1');
    await expect(model.score('x', { topAlternatives: 1.5 })).rejects.toThrow('score: option topAlternatives must be an integer in [0, 2147483647], got 1.5');
  });

  test('a generation after scoring (the session then holds the scored window) gives a fresh run\'s tokens', async () => {
    await model.score(TEXT);
    const afterScore = await run(TEXT, { temperature: 0, maxNewTokens: 20 });
    const fresh = await freshRun(TEXT, { temperature: 0, maxNewTokens: 20 });
    expect(afterScore.tokens).toEqual(fresh.tokens);
  });
});
