// Long work can be stopped and leaves nothing behind (Node API, bundled model, n_ctx 256): score() takes an
// AbortSignal and lets the event loop run between its passes; a long text is tokenized in parts with the same ids;
// runs dropped without return() free their sessions once collected (tests/js/dropped_runs.js, in a child Node with
// --expose-gc). Beam search's scoring of long prompts: beam_search.test.js.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { encodeInParts } from '../../web/lib/generation/score.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { createTokenizer } from '../../web/lib/tokenizer.js';

jest.setTimeout(240_000);

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const SHAKESPEARE = readFileSync(fileURLToPath(new URL('../fixtures/tinyshakespeare/tinyshakespeare.txt', import.meta.url)), 'utf8');
const GPT2_VOCAB = fileURLToPath(new URL('../fixtures/gpt2-vocab/', import.meta.url));
const SHORT_TEXT = 'ROMEO:\nBut soft, what light through yonder window breaks?';

async function greedyText(model) {
  let text = '';
  for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 24 })) text += piece.text;
  return text;
}

describe('score() with an AbortSignal', () => {
  let model;
  let engine;
  beforeAll(async () => {
    model = await loadModel(BUNDLED, { threads: 1 });
    engine = await loadEngine();  // the model's: the single-thread build
  });
  afterAll(() => model?.dispose());

  test('an abort while a text is scored rejects with an AbortError after the pass under way; the next score and generation give what they gave before, and the heap holds what it held', async () => {
    const scored = await model.score(SHORT_TEXT, { topAlternatives: 5 });
    const text = await greedyText(model);
    const heapBefore = engine.heapUsedBytes();

    // 20,000 characters: about 6,000 tokens, 100 passes; the abort comes in the first turn of the event loop
    const controller = new AbortController();
    const scoring = model.score(SHAKESPEARE.slice(0, 20_000), { topAlternatives: 5, signal: controller.signal });
    setImmediate(() => controller.abort());
    const error = await scoring.catch((rejection) => rejection);
    expect(error).toBeInstanceOf(DOMException);
    expect(error.name).toBe('AbortError');
    expect(error.message).toBe('score: aborted');

    expect(await model.score(SHORT_TEXT, { topAlternatives: 5 })).toEqual(scored);
    expect(await greedyText(model)).toBe(text);
    expect(engine.heapUsedBytes()).toBe(heapBefore);
  });

  test('the event loop runs between the passes: a timer set as a score starts fires before the score resolves', async () => {
    let fired = false;
    setTimeout(() => (fired = true), 0);
    const { tokens } = await model.score(SHAKESPEARE.slice(0, 2_000));
    expect(tokens.length).toBeGreaterThan(model.config.n_ctx);
    expect(fired).toBe(true);
  });

  test('a signal aborted before the call rejects at once; a signal that is not an AbortSignal is refused, named', async () => {
    await expect(model.score(SHORT_TEXT, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError', message: 'score: aborted' });
    await expect(model.score(SHORT_TEXT, { signal: 5 })).rejects.toThrow(new RangeError('score: option signal must be an AbortSignal, got 5'));
    await expect(model.score(SHORT_TEXT, { signal: {} })).rejects.toThrow('score: option signal must be an AbortSignal, got {}');
  });
});

describe('a long text is tokenized in parts, a turn of the event loop between them', () => {
  const tokenizer = createTokenizer(JSON.parse(readFileSync(`${GPT2_VOCAB}vocab.json`, 'utf8')), readFileSync(`${GPT2_VOCAB}merges.txt`, 'utf8'));
  // Pieces whose cuts the pre-tokenizer could get wrong: runs of whitespace of every kind (before a word, the last
  // one joins it), contractions, digits, punctuation, letters outside the BMP and CJK without spaces.
  const PIECES = [' ', '  ', '\n', '\n\n', '\t', '\u00a0', '\u3000', ' \n ', 'a', 'Word', "'s", "'ll", "don't", '42', ' 7', '.', '?!', '--',
    '\u{1F600}', '\u{1D400}', '中文', 'é', '\r\n'];

  test('the ids are the whole text\'s for every part size', async () => {
    let seed = 7;
    const random = (n) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let t = 0; t < 200; t++) {
      const text = Array.from({ length: 1 + random(40) }, () => PIECES[random(PIECES.length)]).join('');
      const whole = tokenizer.encode(text);
      for (const partChars of [1, 2, 3, 5, 8, 13]) {
        expect(await encodeInParts(tokenizer, text, { partChars })).toEqual(whole);
      }
    }
    const book = SHAKESPEARE.slice(0, 300_000);
    expect(await encodeInParts(tokenizer, book)).toEqual(tokenizer.encode(book));
  });

  test('an abort between two parts rejects with score()\'s AbortError', async () => {
    const controller = new AbortController();
    const encoding = encodeInParts(tokenizer, 'a b '.repeat(100), { partChars: 10, signal: controller.signal });
    controller.abort();
    await expect(encoding).rejects.toMatchObject({ name: 'AbortError', message: 'score: aborted' });
  });
});

test('100 runs iterated once and dropped without return() free their sessions once collected; the greedy text stays the same', async () => {
  const script = fileURLToPath(new URL('./dropped_runs.js', import.meta.url));
  const { stdout } = await promisify(execFile)('node', ['--expose-gc', script], { encoding: 'utf8' });
  const { heapBefore, heapWhileHeld, heapAfter, textBefore, textAfter } = JSON.parse(stdout);
  const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
  console.log(`wasm heap in use: ${mb(heapBefore)} before, ${mb(heapWhileHeld)} with the 100 runs held, ${mb(heapAfter)} once they were dropped and collected`);
  expect(heapWhileHeld).toBeGreaterThan(heapBefore + 50e6);  // the runs did hold their sessions
  expect(heapAfter).toBe(heapBefore);
  expect(textBefore.length).toBeGreaterThan(0);
  expect(textAfter).toBe(textBefore);
});
