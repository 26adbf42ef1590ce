// An inspection's results as the API gives them (gpt2.d.ts Inspection): the engine's arrays (EngineSession.inspection,
// named as engine/host/host_api.cpp's inspection_views names them) nested by layer, head and position, each row its
// own exact-length copy, tokens with their texts. Plain ES module.
import { ENUMS } from '../engine/engine_constants.js';
import { tokenText } from '../generation/pieces.js';

// The sampler's stages up to this one hold scores (logits after the processors), from it on probabilities.
const FIRST_PROBABILITY_STAGE = ENUMS.samplerStages.indexOf('temperature');

// raw: EngineSession.inspection(); request: the engine's (inspectionRequest: positions, layers, heads, topK,
// logitLens); config: the model's; kvCache: the session's storage ('int8' or 'fp32').
export function readInspection(raw, { layers, heads, topK, logitLens }, { config, tokenizer, kvCache }) {
  const positions = Array.from(raw.positions);
  const L = layers.length, H = heads.length, K = topK, headSize = config.n_embd / config.n_head;
  const slot = (i, l, h = 0) => (i * L + l) * H + h;  // of the (position, layer, head) arrays
  const byLayer = (fn) => layers.map((_, l) => fn(l));
  const byHead = (fn) => heads.map((_, h) => fn(h));
  const byPosition = (fn) => positions.map((position, i) => fn(i, position));
  return {
    positions,
    layers: [...layers],
    heads: [...heads],
    attention: byLayer((l) => byHead((h) => byPosition((i, position) => {
      const start = slot(i, l, h) * raw.rowStride;
      return raw.attention.slice(start, start + position + 1);
    }))),
    logitLens: logitLens ? byLayer((l) => byPosition((i) => lensEntries(raw, (i * L + l) * K, K, tokenizer))) : null,
    blocks: byLayer((l) => byPosition((i) => {
      const b = (i * L + l) * 3;
      return {
        attention: raw.blocks[b],
        mlp: raw.blocks[b + 1],
        residual: raw.blocks[b + 2],
        heads: byHead((h) => {
          const q = slot(i, l, h) * 3;
          return { query: raw.qkvNorms[q], key: raw.qkvNorms[q + 1], value: raw.qkvNorms[q + 2] };
        }),
      };
    })),
    kv: {
      format: kvCache,
      filled: raw.nCached,
      capacity: config.n_ctx,
      bytes: raw.kvCacheBytes,
      bytesPerPosition: raw.kvCacheBytes / config.n_ctx,
      events: cacheEvents(raw.events),
      rows: byLayer((l) => byHead((h) => byPosition((i) => {
        const r = slot(i, l, h) * 2 * headSize;
        return { key: raw.kvRows.slice(r, r + headSize), value: raw.kvRows.slice(r + headSize, r + 2 * headSize) };
      }))),
    },
  };
}

function lensEntries(raw, start, K, tokenizer) {
  const entries = [];
  for (let k = start; k < start + K; k++) {
    const id = raw.lensTokens[k];
    if (id >= 0) entries.push({ id, text: tokenText(tokenizer, id), logit: raw.lensLogits[k], probability: raw.lensProbabilities[k] });
  }
  return entries;
}

// [kind, first, count] triples -> [{ kind, first, count }]
function cacheEvents(flat) {
  const events = [];
  for (let e = 0; e < flat.length; e += 3) events.push({ kind: ENUMS.cacheEvents[flat[e]], first: flat[e + 1], count: flat[e + 2] });
  return events;
}

// The sampler's trace of the call's draw: { stages: [{ name, ran, candidates, values: 'logits' | 'probabilities',
// top: [{ id, text, value }] }] in the order the sampler runs them, token, text, how: 'greedy' | 'sampled',
// probability (the token's in the distribution drawn from), draw (sampled: the uniform number whose inverse CDF the
// token is) }.
export function readSamplerTrace(raw, topK, tokenizer) {
  const stages = ENUMS.samplerStages.map((name, s) => {
    const top = [];
    for (let k = 0; k < raw.stageTopCount[s]; k++) {
      const id = raw.stageTop[s * topK + k];
      top.push({ id, text: tokenText(tokenizer, id), value: raw.stageValues[s * topK + k] });
    }
    return {
      name, ran: raw.stageRan[s] === 1, candidates: raw.stageCandidates[s],
      values: s < FIRST_PROBABILITY_STAGE ? 'logits' : 'probabilities', top,
    };
  });
  const greedy = stages[ENUMS.samplerStages.indexOf('greedy')].ran;
  return {
    stages, token: raw.token, text: tokenText(tokenizer, raw.token), how: greedy ? 'greedy' : 'sampled',
    probability: raw.probability, draw: greedy ? null : raw.draw,
  };
}
