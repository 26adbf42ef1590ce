// The measure.mjs driver over the wasm engine (web/lib/engine/engine.js objects), for Node and the Chromium worker.
// engine: from loadEngine({ threads }), the shipped build, which is what gets timed; model: an EngineModel on it.
// Creates a cached and an uncached greedy session with the KV cache storage kvCache ('int8' or 'fp32'). The bandwidth probe is a testing-build hook: it runs in a
// testing instance of its own (probeEngine(): loadEngine({ testing: true })), beside the timed one.

export function createWasmDriver(engine, model, probeEngine, kvCache) {
  const sessions = {
    cached: model.createSession({ useKVCache: true, kvCache }),
    uncached: model.createSession({ useKVCache: false, kvCache }),
  };
  for (const session of Object.values(sessions)) session.setSampling({ temperature: 0 });

  function timed(fn) {
    const start = performance.now();
    const token = fn();
    return { token, ms: performance.now() - start };
  }

  return {
    async info() {
      return { config: model.config, weightBytes: model.weightBytes, kvCacheBytes: sessions.cached.kvCacheBytes, threads: model.threads };
    },
    async prefill(mode, ids) {
      return timed(() => sessions[mode].prefill(ids));
    },
    async step(mode, id) {
      return timed(() => sessions[mode].step(id));
    },
    streamWeights: async (repeats) => streamReadMs(await probeEngine(), model.weightBytes, repeats),
    // heapBytes: the wasm memory's size, which never shrinks, so it is also the peak so far;
    // heapUsedBytes: what malloc holds now.
    async memory() {
      return { heapBytes: engine.heapBytes(), heapUsedBytes: engine.heapUsedBytes() };
    },
    async releaseUncached() {
      sessions.uncached?.dispose();
      delete sessions.uncached;
    },
    dispose() {
      for (const session of Object.values(sessions)) session.dispose();
    },
  };
}

// The streaming-read ceiling: ms of each of `repeats` reads over a heap block of `bytes` filled like the native
// probe's (tools/bench/bandwidth.cpp). Also the ceiling of onnxruntime-web in Node, the same wasm runtime.
export function streamReadMs(engine, bytes, repeats) {
  const block = engine.allocate(bytes);
  try {
    const view = block.view();
    new Float32Array(view.buffer, view.byteOffset, bytes / 4).fill(1 / 1024);
    const times = [];
    for (let i = 0; i < repeats; i++) {
      const start = performance.now();
      block.streamRead();
      times.push(performance.now() - start);
    }
    return times;
  } finally {
    block.dispose();
  }
}
