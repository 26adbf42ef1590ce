// Tests of the built wasm engine (the testing build of public/wasm's, build/wasm-testing) through web/lib/engine/engine.js, in Node: agreement with the native tool
// and the fixtures, cached vs uncached decoding, errors that leave the instance usable, and no heap leaks.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { MAX_CONFIG_JSON_CHARS, WasmEngine, loadEngine } from '../../web/lib/engine/engine.js';
import { EngineAbortedError } from '../../web/lib/errors.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TINY = `${ROOT}tests/fixtures/tiny-random/`;
const NATIVE_TOOL = `${ROOT}build/native/gpt2`;
const configJson = readFileSync(`${TINY}config.json`, 'utf8');
const weights = new Uint8Array(readFileSync(`${TINY}model.safetensors`));
const greedy = JSON.parse(readFileSync(`${TINY}greedy.json`, 'utf8'));
const cases = JSON.parse(readFileSync(`${TINY}cases.json`, 'utf8'));

let engine;
beforeAll(async () => {
  engine = await loadEngine({ testing: true });  // for session.logits() and engine.allocate()
});

function withModel(fn, modelWeights = weights) {
  const model = engine.createModel(configJson, modelWeights);
  try {
    return fn(model);
  } finally {
    model.dispose();
  }
}

function withSession(model, options, fn) {
  const session = model.createSession(options);
  try {
    return fn(session);
  } finally {
    session.dispose();
  }
}

// The prefill's token, then one step per further token, like the native tool.
function generateIds(session, prompt, count, sampling = { temperature: 0 }) {
  session.setSampling(sampling);
  const ids = [session.prefill(prompt)];
  while (ids.length < count) ids.push(session.step(ids.at(-1)));
  return ids;
}

function nativeIds(prompt, count, extraArgs = [], modelDir = TINY) {
  const args = ['--model', modelDir, '--ids', prompt.join(','), '-n', String(count), '--no-stop', ...extraArgs];
  const output = execFileSync(NATIVE_TOOL, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return output.trim().split(',').map(Number);
}

// The native tool reads DIR/model.safetensors: a temporary folder links the F16/BF16 variants under that name.
function nativeIdsWithWeights(weightsFile, prompt, count) {
  const dir = mkdtempSync(`${tmpdir()}/gpt2-wasm-test-`);
  try {
    symlinkSync(`${TINY}config.json`, `${dir}/config.json`);
    symlinkSync(`${TINY}${weightsFile}`, `${dir}/model.safetensors`);
    return nativeIds(prompt, count, [], dir);
  } finally {
    rmSync(dir, { recursive: true });
  }
}

function greedyIds(useKVCache = true) {
  return withModel((model) => withSession(model, { useKVCache }, (s) => generateIds(s, greedy.prompt, 40)));
}

describe('wasm engine', () => {
  test('reports the model config (all of it, as float32 holds it) and weight size', () => {
    withModel((model) => {
      expect(model.config).toEqual({ n_vocab: 384, n_ctx: 320, n_embd: 64, n_head: 4, n_layer: 2, layer_norm_epsilon: Math.fround(1e-5) });
      expect(model.weightBytes).toBeGreaterThan(0);
    });
  });

  test('greedy tokens equal greedy.json and the native tool', () => {
    const ids = greedyIds();
    expect(ids).toEqual(greedy.generated);
    expect(ids).toEqual(nativeIds(greedy.prompt, 40));
  });

  test('seeded sampling equals the native tool', () => {
    const sampling = { temperature: 0.9, topK: 40, topP: 0.95, repetitionPenalty: 1.2, seed: 1234 };
    const ids = withModel((model) => withSession(model, {}, (s) => generateIds(s, greedy.prompt, 40, sampling)));
    const flags = ['--temperature', '0.9', '--top-k', '40', '--top-p', '0.95', '--repetition-penalty', '1.2', '--seed', '1234'];
    expect(ids).toEqual(nativeIds(greedy.prompt, 40, flags));
  });

  test('cached and uncached decoding give identical tokens', () => {
    expect(greedyIds(false)).toEqual(greedyIds(true));
    const sampling = { temperature: 1, seed: 7 };
    const [cached, uncached] = [true, false].map((useKVCache) =>
      withModel((model) => withSession(model, { useKVCache }, (s) => generateIds(s, [1, 2, 3], 30, sampling))),
    );
    expect(uncached).toEqual(cached);
  });

  test('the bundled model decodes the same tokens as the native tool, across a window slide', () => {
    const bundled = `${ROOT}public/models/tiny-shakespeare/`;
    const bundledWeights = new Uint8Array(readFileSync(`${bundled}model.safetensors`));
    const model = engine.createModel(readFileSync(`${bundled}config.json`, 'utf8'), bundledWeights);
    try {
      const prompt = [49, 2662, 36, 46, 25, 198];  // "ROMEO:\n"
      // 300 tokens pass the 256-token context: the window slides once, in both engines.
      const greedyWasm = withSession(model, {}, (s) => generateIds(s, prompt, 300));
      expect(greedyWasm).toEqual(nativeIds(prompt, 300, [], bundled));
      const sampling = { temperature: 0.8, topK: 40, seed: 7 };
      const sampledWasm = withSession(model, {}, (s) => generateIds(s, prompt, 100, sampling));
      expect(sampledWasm).toEqual(nativeIds(prompt, 100, ['--temperature', '0.8', '--top-k', '40', '--seed', '7'], bundled));
    } finally {
      model.dispose();
    }
  });

  test('int8 weights: quarter-size, cached equals uncached, and the same tokens as the native tool --int8', () => {
    const bundled = `${ROOT}public/models/tiny-shakespeare/`;
    const bundledConfig = readFileSync(`${bundled}config.json`, 'utf8');
    const bundledWeights = new Uint8Array(readFileSync(`${bundled}model.safetensors`));
    const fp32 = engine.createModel(bundledConfig, bundledWeights, { weights: 'fp32' });
    const int8 = engine.createModel(bundledConfig, bundledWeights, { weights: 'int8' });
    try {
      expect(int8.weightBytes * 3).toBeLessThan(fp32.weightBytes);
      const prompt = [49, 2662, 36, 46, 25, 198];  // "ROMEO:\n"
      const cached = withSession(int8, {}, (s) => generateIds(s, prompt, 300));
      expect(cached).toEqual(nativeIds(prompt, 300, ['--int8'], bundled));
      expect(withSession(int8, { useKVCache: false }, (s) => generateIds(s, prompt, 40))).toEqual(cached.slice(0, 40));
    } finally {
      fp32.dispose();
      int8.dispose();
    }
    expect(() => engine.createModel(configJson, weights, { weights: 'int4' })).toThrow('weights must be "fp32" or "int8"');
  });

  test('F16 and BF16 weights load and decode like the native tool', () => {
    for (const file of ['model-f16.safetensors', 'model-bf16.safetensors']) {
      const bytes = new Uint8Array(readFileSync(`${TINY}${file}`));
      const ids = withModel((model) => withSession(model, {}, (s) => generateIds(s, greedy.prompt, 20)), bytes);
      expect(ids).toEqual(nativeIdsWithWeights(file, greedy.prompt, 20));
    }
  });

  test('a GGUF with every tensor type gives the native tool\'s logits and tokens', () => {
    const dir = `${ROOT}tests/fixtures/tiny-gguf/`;
    const { prompt } = JSON.parse(readFileSync(`${dir}cases.json`, 'utf8'));
    const tmp = mkdtempSync(`${tmpdir()}/gpt2-wasm-test-`);
    try {
      execFileSync(NATIVE_TOOL, ['--model', `${dir}model.gguf`, '--ids', prompt.join(','), '-n', '1', '--dump-logits', `${tmp}/logits.f32`],
        { stdio: 'ignore' });
      const native = new Float32Array(readFileSync(`${tmp}/logits.f32`).buffer.slice(0));
      const model = engine.createGgufModel(readFileSync(`${dir}model.gguf`));
      try {
        expect(model.weightTypes).toBe('f16, fp32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k');
        withSession(model, {}, (session) => {
          session.prefill(prompt);
          const expected = native.subarray(native.length - 384);
          const diff = Math.max(...Array.from(session.logits(), (value, i) => Math.abs(value - expected[i])));
          console.log(`GGUF wasm vs native: max |logit diff| ${diff}`);
          expect(diff).toBeLessThan(1e-4);
        });
        const ids = withSession(model, {}, (session) => generateIds(session, prompt.slice(0, 3), 30));
        expect(ids).toEqual(nativeIds(prompt.slice(0, 3), 30, [], `${dir}model.gguf`));
      } finally {
        model.dispose();
      }
    } finally {
      rmSync(tmp, { recursive: true });
    }
  });

  // The int8 KV cache's bound on this random-weight model is looser than on the bundled model (1 %,
  // tests/cpp/test_kv_cache.cpp): measured 1.3 % of the logits' rms.
  test('logits of the last prompt position match the fixture: within 1e-4 with the fp32 KV cache, within 2 % of their rms with int8', () => {
    const testCase = cases.find((c) => c.name === 'short');
    const all = new Float32Array(readFileSync(`${TINY}${testCase.logits}`).buffer.slice(0));
    const expected = all.subarray(all.length - 384);
    const rms = Math.sqrt(expected.reduce((sum, x) => sum + x * x, 0) / expected.length);
    for (const [kvCache, tolerance] of [['fp32', 1e-4], ['int8', 0.02 * rms]]) {
      withModel((model) =>
        withSession(model, { kvCache }, (session) => {
          session.prefill(testCase.ids);
          const logits = Array.from(session.logits());
          logits.forEach((value, i) => expect(Math.abs(value - expected[i])).toBeLessThan(tolerance));
        }),
      );
    }
  });

  test('distribution() is the softmax of the logits, with the top alternatives first', () => {
    withModel((model) =>
      withSession(model, {}, (session) => {
        session.setSampling({ temperature: 0 });
        const next = session.prefill(greedy.prompt);
        const logits = Array.from(session.logits());
        const max = Math.max(...logits);
        const sum = logits.reduce((acc, x) => acc + Math.exp(x - max), 0);
        const { probability, alternatives } = session.distribution(next, 5);
        expect(probability).toBeCloseTo(Math.exp(logits[next] - max) / sum, 6);
        expect(alternatives).toHaveLength(5);
        expect(alternatives[0]).toEqual({ token: next, probability });
        for (let i = 1; i < 5; i++) expect(alternatives[i].probability).toBeLessThanOrEqual(alternatives[i - 1].probability);
      }),
    );
  });

  test('decoding continues past n_ctx by sliding the window', () => {
    withModel((model) =>
      withSession(model, {}, (session) => {
        const ids = generateIds(session, [5], 700, { temperature: 1, seed: 3 });
        expect(ids.every((id) => id >= 0 && id < 384)).toBe(true);
        expect(session.nCached).toBeLessThanOrEqual(320);
        expect(session.kvCacheBytes).toBeGreaterThan(0);
      }),
    );
  });

  test('a session keeps working after its model is disposed', () => {
    const model = engine.createModel(configJson, weights);
    const session = model.createSession();
    model.dispose();
    expect(generateIds(session, greedy.prompt, 40)).toEqual(greedy.generated);
    session.dispose();
  });
});

describe('wasm engine errors', () => {
  test('a weights buffer larger than the wasm heap can hold is out of memory with the size, not a wrapped size', () => {
    for (const bytes of [3.9e9, 6.4e9]) {  // GPT-2 1.5B in F32 is 6.4 GB
      expect(() => engine.allocate(bytes)).toThrow(new RegExp(`out of memory: cannot allocate ${bytes} bytes`));
    }
    const block = engine.allocate(1024);  // the instance stays usable
    block.view().set(new Uint8Array([1, 2, 3]));
    expect(Array.from(block.view().slice(0, 3))).toEqual([1, 2, 3]);
    block.dispose();
  });

  function expectStillUsable() {
    expect(greedyIds()).toEqual(greedy.generated);
  }

  test('corrupt safetensors throws the engine message', () => {
    const corrupt = weights.slice(0, 1000);
    expect(() => engine.createModel(configJson, corrupt)).toThrow(/^model\.safetensors: .*exceeds the file size/);
    const garbage = new Uint8Array(4096).fill(0x41);
    expect(() => engine.createModel(configJson, garbage)).toThrow(/^model\.safetensors: /);
    expectStillUsable();
  });

  test('a config.json text over MAX_CONFIG_JSON_CHARS is refused before it enters the heap', () => {
    const huge = `${configJson.slice(0, -1)},"padding":"${'x'.repeat(MAX_CONFIG_JSON_CHARS)}"}`;
    expect(() => engine.createModel(huge, weights)).toThrow(
      `config.json: ${huge.length} characters; a config.json is at most ${MAX_CONFIG_JSON_CHARS}`);
    expectStillUsable();
  });

  test('bad config JSON throws the engine message', () => {
    expect(() => engine.createModel('{"vocab_size": 384,', weights)).toThrow(/^config\.json: not valid JSON/);
    expect(() => engine.createModel('{"vocab_size": 99}', weights)).toThrow(/^config\.json: missing key/);
    expectStillUsable();
  });

  test('out-of-range and non-integer tokens throw, and the session stays usable', () => {
    withModel((model) =>
      withSession(model, {}, (session) => {
        expect(() => session.prefill([1, 384])).toThrow(/out of range/);
        expect(() => session.prefill([1, -1])).toThrow(/out of range/);
        expect(() => session.prefill([])).toThrow(/no token ids/);
        session.prefill(greedy.prompt);
        expect(() => session.step(100000)).toThrow(/out of range/);
        expect(() => session.step(1.5)).toThrow(/integer/);
        expect(() => session.setSampling({ seed: -1 })).toThrow(/seed/);
        expect(generateIds(session, greedy.prompt, 40)).toEqual(greedy.generated);
      }),
    );
    expectStillUsable();
  });

  test('a recording session refuses prefill, step and score: its host runs the forward pass', () => {
    const refusal = (call) => `${call}: a recording session is fed by feed_step() and feed_prompt(), and its host runs the forward pass`;
    withModel((model) =>
      withSession(model, { recording: true, kvCache: 'fp32' }, (session) => {
        expect(() => session.prefill(greedy.prompt)).toThrow(refusal('prefill'));
        expect(() => session.prefillReusing(greedy.prompt)).toThrow(refusal('prefill_reusing'));
        expect(() => session.step(1)).toThrow(refusal('step'));
        expect(() => session.score(greedy.prompt)).toThrow(refusal('score'));
        session.feedPrompt(greedy.prompt, false);  // what the host calls instead
        expect(session.nCached).toBe(greedy.prompt.length);
      }),
    );
    expectStillUsable();
  });

  test('use after dispose throws instead of touching freed memory', () => {
    const model = engine.createModel(configJson, weights);
    const session = model.createSession();
    session.dispose();
    model.dispose();
    expect(() => session.step(1)).toThrow(/disposed/);
    expect(() => model.createSession()).toThrow(/disposed/);
  });

  test('50 create/dispose cycles leave the heap allocation flat', () => {
    const cycle = () =>
      withModel((model) => {
        for (const useKVCache of [true, false]) {
          withSession(model, { useKVCache }, (session) => {
            generateIds(session, greedy.prompt, 5);
            session.distribution(1, 3);
          });
        }
        expect(() => engine.createModel('{', weights)).toThrow();
      });
    cycle();
    const baseline = engine.heapUsedBytes();
    for (let i = 0; i < 50; i++) cycle();
    expect(engine.heapUsedBytes()).toBe(baseline);
  });

  test('a wasm trap marks the instance aborted, and later calls fail with a clear error', () => {
    const trapping = new WasmEngine({
      heapUsedBytes: () => {
        throw new WebAssembly.RuntimeError('memory access out of bounds');
      },
    });
    expect(() => trapping.heapUsedBytes()).toThrow(EngineAbortedError);
    expect(trapping.aborted).toBe(true);
    expect(() => trapping.allocate(16)).toThrow(/crashed \(memory access out of bounds\); reload the model/);
  });
});
