// The sessions of a model's runs: one idle session kept per KV-cache mode and storage (SessionPool), and the
// several sessions of a run that decodes several sequences together (acquireSessions). Plain ES module.

// Keeps one idle session per KV-cache mode and storage, the one released last, so consecutive generations
// neither reallocate the cache nor, when a prompt starts with the tokens the last run left in its window,
// compute those again (Session::prefill_reusing). model.score() takes its session from here too.
export class SessionPool {
  #model;
  #idle = new Map();
  #disposed = false;

  constructor(engineModel) {
    this.#model = engineModel;
  }

  // options: { useKVCache, kvCache } as normalizeGenerateOptions returns them
  acquire({ useKVCache, kvCache }) {
    const key = `${useKVCache} ${kvCache}`;
    const session = this.#idle.get(key);
    if (session) {
      this.#idle.delete(key);
      return session;
    }
    return this.#model.createSession({ useKVCache, kvCache });
  }

  release(session, { useKVCache, kvCache }) {
    const key = `${useKVCache} ${kvCache}`;
    if (this.#disposed) return void session.dispose();
    this.#idle.get(key)?.dispose();  // an older run's window: the newer one is likelier to be continued
    this.#idle.set(key, session);
  }

  // Frees a session instead of keeping it: one left in the middle of a score (score.js, beams.js), whose unfinished
  // run holds its buffers.
  discard(session) {
    session.dispose();
  }

  dispose() {
    this.#disposed = true;
    for (const session of this.#idle.values()) session.dispose();
    this.#idle.clear();
  }
}

// A SessionPool over a model still to come (a GPU model's CPU twin, GpuModel.cpuModel(), which may load the weights
// again): acquire() -> a promise of a session, once the model is there.
export class DeferredSessionPool {
  #loadModel;
  #pool = null;  // a promise of the SessionPool, from the first acquire()
  #disposed = false;

  constructor(loadModel) {
    this.#loadModel = loadModel;
  }

  async acquire(options) {
    this.#pool ??= this.#loadModel().then((model) => new SessionPool(model));
    const pool = await this.#pool;
    if (this.#disposed) throw new Error('the model was disposed');
    return pool.acquire(options);
  }

  // only sessions that acquire() gave, so the pool is there
  release(session, options) {
    this.#pool.then((pool) => (this.#disposed ? session.dispose() : pool.release(session, options)));
  }

  discard(session) {
    session.dispose();
  }

  dispose() {
    this.#disposed = true;
    this.#pool?.then((pool) => pool.dispose(), () => {});
  }
}

// Fills sessions with n of the pool's sessions for a run that decodes several sequences together, which only the
// CPU engine's can (a GPU session has no `method`; the error names `option`). The caller releases them.
export function acquireSessions(pool, options, n, sessions, { method, option }) {
  sessions.push(pool.acquire(options));
  if (!sessions[0][method]) throw new Error(`generate: ${option} > 1 runs on the CPU engine (device: "wasm")`);
  while (sessions.length < n) sessions.push(pool.acquire(options));
}
