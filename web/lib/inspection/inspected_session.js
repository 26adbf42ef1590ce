// A session whose feeds are all inspected (generate()'s inspect): prefill, prefillReusing and step are the engine
// session's inspected calls (the same tokens: engine/inspection/inspector.h), and inspection() gives what the last
// one showed, with the sampler's trace of its draw, for the piece of the token it drew. The rest of what the
// generation loop reads passes through. Plain ES module.
import { readInspection, readSamplerTrace } from './inspection_result.js';
import { ranOn } from './inspect.js';

export class InspectedSession {
  #session;
  #request;
  #context;  // { config, tokenizer, kvCache, device }

  // session: an EngineSession (the CPU engine's); request: the engine's (inspectionRequest with no positions: the
  // last one fed); context: { config, tokenizer, device: the device of the model asked }
  constructor(session, request, { config, tokenizer, device }) {
    session.inspect(request);
    this.#session = session;
    this.#request = request;
    this.#context = { config, tokenizer, kvCache: session.kvCache, device };
  }

  setSampling(settings) {
    this.#session.setSampling(settings);
  }

  prefill(ids) {
    return this.#session.inspectPrompt(ids, false);
  }

  prefillReusing(ids) {
    return this.#session.inspectPrompt(ids, true);
  }

  step(id) {
    return this.#session.inspectStep(id);
  }

  distribution(token, topK, row) {
    return this.#session.distribution(token, topK, row);
  }

  get reusedTokens() {
    return this.#session.reusedTokens;
  }

  get nCached() {
    return this.#session.nCached;
  }

  get kvCache() {
    return this.#session.kvCache;
  }

  get kvCacheBytes() {
    return this.#session.kvCacheBytes;
  }

  // What the last call's pass showed at the position it fed last, and how its token was drawn:
  // { positions, layers, heads, attention, logitLens, blocks, kv, sampler, device, note? }
  inspection() {
    const raw = this.#session.inspection();
    const { config, tokenizer, kvCache, device } = this.#context;
    return {
      ...readInspection(raw, this.#request, { config, tokenizer, kvCache }),
      sampler: readSamplerTrace(raw, this.#request.topK, tokenizer),
      ...ranOn(device),
    };
  }

  // The session as it was: its inspection's results freed.
  end() {
    this.#session.endInspection();
    return this.#session;
  }
}
