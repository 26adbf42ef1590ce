// Models in this thread (Node, plain workers, and the engine worker itself, web/lib/worker/worker.js): the engine model and
// the tokenizer behind the public Model interface (see gpt2.js), generating with generate.js's loop and scoring
// with score.js.
import { loadEngine } from '../engine/engine.js';
import { DEFAULT_THREADS, resolveThreads } from '../engine/threads.js';
import { Generation, SessionPool, normalizeGenerateOptions } from '../generation/generate.js';
import { loadModelIntoEngine } from '../loading/loader.js';
import { normalizeScoreOptions, scoreText } from '../generation/score.js';
import { DescribedModel } from './model_description.js';

export async function loadModelInThisThread(source, { onProgress, signal, weights = 'fp32', threads = DEFAULT_THREADS } = {}) {
  const engine = await loadEngine({ threads: await resolveThreads(threads) });
  const { model, tokenizer } = await loadModelIntoEngine(engine, source, { onProgress, signal, weights });
  return new LocalModel(model, tokenizer);
}

class LocalModel extends DescribedModel {
  #engineModel;
  #pool;
  #tokenizer;

  constructor(engineModel, tokenizer) {
    super(engineModel);
    this.#engineModel = engineModel;
    this.#pool = new SessionPool(engineModel);
    this.#tokenizer = tokenizer;
  }

  generate(prompt, options) {
    if (!this.#pool) throw new Error('the model was disposed');
    const target = { pool: this.#pool, tokenizer: this.#tokenizer, config: this.config };
    return new Generation(target, prompt, normalizeGenerateOptions(options));
  }

  async score(text, options) {
    const checked = normalizeScoreOptions(options);
    if (!this.#pool) throw new Error('the model was disposed');
    return scoreText({ pool: this.#pool, tokenizer: this.#tokenizer }, text, checked);
  }

  async encode(text) {
    return this.#tokenizer.encode(text);
  }

  async decode(ids) {
    return this.#tokenizer.decode(Array.from(ids));
  }

  // A model in this thread is not loaded again after its engine crashed: this then rejects with the crash.
  async whenUsable() {
    if (!this.#engineModel) throw new Error('the model was disposed');
    if (this.#engineModel.engine.aborted) this.#engineModel.engine.call(() => {});  // throws EngineAbortedError
  }

  // Generations still running keep their session (and the weights) until they end.
  dispose() {
    this.#pool?.dispose();
    this.#engineModel?.dispose();
    this.#pool = this.#engineModel = null;
  }
}
