// Models in this thread (Node, plain workers, and the engine worker itself, web/worker.js): the engine model and
// the tokenizer behind the public Model interface (see gpt2.js), generating with generate.js's loop.
import { DEFAULT_THREADS, loadEngine, resolveThreads } from './engine.js';
import { Generation, SessionPool, normalizeGenerateOptions } from './generate.js';
import { ModelLoadError, loadEngineModel } from './loader.js';
import { createTokenizer } from './tokenizer.js';

export async function loadLocalModel(source, { onProgress, signal, weights = 'fp32', threads = DEFAULT_THREADS } = {}) {
  const engine = await loadEngine({ threads: await resolveThreads(threads) });
  const { model, vocab, merges } = await loadEngineModel(engine, source, { onProgress, signal, weights });
  try {
    return new LocalModel(model, createModelTokenizer(vocab, merges, model.config));
  } catch (error) {
    model.dispose();
    throw error;
  }
}

function createModelTokenizer(vocab, merges, config) {
  let tokenizer;
  try {
    tokenizer = createTokenizer(vocab, merges);
  } catch (error) {
    throw new ModelLoadError('vocab.json + merges.txt', 'invalid', `invalid tokenizer files: ${error.message}`);
  }
  if (tokenizer.vocabSize > config.n_vocab) {
    throw new ModelLoadError('vocab.json', 'invalid',
      `has ${tokenizer.vocabSize} tokens but the model only ${config.n_vocab}: files of different models?`);
  }
  return tokenizer;
}

class LocalModel {
  config;
  weightBytes;
  threads;
  #engineModel;
  #pool;
  #tokenizer;

  constructor(engineModel, tokenizer) {
    this.config = engineModel.config;
    this.weightBytes = engineModel.weightBytes;
    this.threads = engineModel.threads;
    this.#engineModel = engineModel;
    this.#pool = new SessionPool(engineModel);
    this.#tokenizer = tokenizer;
  }

  generate(prompt, options) {
    if (!this.#pool) throw new Error('the model was disposed');
    const target = { pool: this.#pool, tokenizer: this.#tokenizer, config: this.config };
    return new Generation(target, prompt, normalizeGenerateOptions(options));
  }

  async encode(text) {
    return this.#tokenizer.encode(text);
  }

  async decode(ids) {
    return this.#tokenizer.decode(Array.from(ids));
  }

  // Generations still running keep their session (and the weights) until they end.
  dispose() {
    this.#pool?.dispose();
    this.#engineModel?.dispose();
    this.#pool = this.#engineModel = null;
  }
}
