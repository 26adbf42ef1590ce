// A run's live stats (generation.stats): made at its start, the window's part updated as it goes. Plain ES module.

export function createStats(contextSize) {
  return {
    promptTokens: 0,
    reusedTokens: 0,  // prompt tokens whose KV cache was kept from the session's previous run (not computed again)
    generatedTokens: 0,
    prefillMs: 0,
    decodeTokensPerSecond: 0,
    contextUsed: 0,
    contextSize,
    kvCacheBytes: 0,
    kvCache: null,  // the cache's storage, 'int8' or 'fp32'
    device: null,  // where the passes run, 'webgpu' or 'wasm'
    deviceLost: null,  // why a GPU session went on on the CPU, if its device was lost
    draftedTokens: 0,  // speculative decoding: tokens drafted and verified
    acceptedTokens: 0,  // of those, the ones the model's own tokens matched (each a pass saved)
    stopReason: null,  // 'eos' | 'stop' | 'length' | 'abort' | 'error' once finished
  };
}

export function updateContextStats(stats, session) {
  stats.contextUsed = session.nCached;
  stats.kvCacheBytes = session.kvCacheBytes;
  stats.kvCache = session.kvCache;
  // a GPU session goes on on the CPU when its device is lost (gpu_session.js)
  stats.device = session.device ?? 'wasm';
  stats.deviceLost = session.deviceLost ?? null;
}
