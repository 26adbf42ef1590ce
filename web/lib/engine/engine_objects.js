// The engine's embind objects owned by JS (wasm/bindings.cpp): the model loader, a model's weights, a
// generation's session, a beam search, and the testing build's heap block. Each frees its C++ object in dispose().
import { EngineError } from '../errors.js';

// An embind object owned by JS: the handle's calls go through the engine (aborts become EngineAbortedError),
// and dispose() frees it once. The base of the wrappers below.
class EngineObject {
  #engine;
  #handle;
  #what;

  constructor(engine, handle, what) {
    this.#engine = engine;
    this.#handle = handle;
    this.#what = what;
  }

  get engine() {
    return this.#engine;
  }

  dispose() {
    this.#engine.release(this.#handle);
    this.#handle = null;
  }

  // Runs fn(handle) against the live handle (fn may return the handle, to pass it to another object's call).
  call(fn) {
    const handle = this.#handle;
    if (!handle) throw new Error(`the ${this.#what} was disposed`);
    return this.#engine.call(() => fn(handle));
  }

  // Runs fn(handle), whose result `failed` marks as an error, which is then thrown as the handle reports it.
  checkedCall(fn, failed) {
    const result = this.call(fn);
    if (failed(result)) throw new EngineError(this.call((handle) => handle.error()));
    return result;
  }
}

// Where a loader's matrices go (gpt2::MatrixReceiver through wasm/bindings.cpp's JsMatrixReceiver): onMatrixRows({ layer,
// name, format, nOut, nIn, row0, nRows, rows, scale }) for each matrix's rows, in order, as they are converted (the
// views are the heap's, valid during the call only). What it throws stops the load, and the loader's feed throws
// it again, unchanged; it never unwinds through the engine. Without onMatrixRows the model keeps its matrices.
export class MatrixRowsReceiver {
  failure = null;
  receive = null;  // the function the binding calls, or null

  constructor(onMatrixRows) {
    if (!onMatrixRows) return;
    this.receive = (rows) => {
      try {
        onMatrixRows(rows);
        return '';
      } catch (error) {
        this.failure = error;
        return error?.message || String(error);
      }
    };
  }
}

// model.safetensors or a GGUF file fed in order, in pieces of any size (gpt2::ModelLoader). Errors throw EngineError ("file"
// or "memory"), or what the loader's onMatrixRows threw; after one, the loader only needs dispose().
export class EngineModelLoader extends EngineObject {
  #receiver;

  constructor(engine, handle, receiver) {
    super(engine, handle, 'model loader');
    this.#receiver = receiver;
  }

  // bytes: the next bytes of the file (Uint8Array).
  feed(bytes) {
    let offset = 0;
    do {
      // The view is fetched for each piece: a call that grows the memory detaches the previous one.
      const staging = this.call((handle) => handle.staging());
      const piece = bytes.subarray(offset, offset + staging.byteLength);
      staging.set(piece);
      try {
        this.checkedCall((handle) => handle.feed(piece.byteLength), (fed) => !fed);
      } catch (error) {
        throw this.#receiver.failure ?? error;
      }
      offset += piece.byteLength;
    } while (offset < bytes.byteLength);
  }

  // The end of the file -> EngineModel (throws when the file is incomplete or invalid).
  finish() {
    const handle = this.call((loader) => this.engine.construct((module) => new module.Model(loader)));
    return new EngineModel(this.engine, handle);
  }
}

// A block of the heap (testing build: engine.allocate()).
export class HeapBlock extends EngineObject {
  constructor(engine, handle) {
    super(engine, handle, 'heap block');
  }

  // Uint8Array over the block: valid until the next call into the engine.
  view() {
    return this.call((handle) => handle.view());
  }

  // One streaming read of the block's floats (the benchmark's bandwidth probe).
  streamRead() {
    return this.call((handle) => handle.streamRead());
  }
}

// Weights of one model (embind Model). Sessions keep the weights alive in C++, so dispose() order is free.
export class EngineModel extends EngineObject {
  config;  // { n_vocab, n_ctx, n_embd, n_head, n_layer, layer_norm_epsilon }
  weightBytes;
  threads;  // threads its forward pass uses
  simd;  // the engine build's SIMD instructions: 'relaxed' or 'simd128'
  weightTypes;  // the storage formats of its matrices: "fp32", "int8", or a GGUF file's, e.g. "q4_k, q6_k"

  constructor(engine, handle) {
    super(engine, handle, 'model');
    this.config = handle.config();
    this.weightBytes = handle.weightBytes();
    this.threads = handle.threads();
    this.simd = engine.simd;
    this.weightTypes = handle.weightTypes();
  }

  // A GGUF model's tokenizer: { tokens: string[] (id order), merges: string[] ("a b"), eosTokenId,
  // bosTokenId (or null) }; null for a safetensors model.
  readVocabulary() {
    return this.call((model) => model.vocabulary());
  }

  // Frees the heap's copy of the weights once a GPU holds them (gpt2::Model::release_weights): the model then makes
  // only recording sessions.
  releaseWeights() {
    this.call((model) => model.releaseWeights());
    this.weightBytes = 0;
  }

  // kvCache: the cache's storage, 'int8' (a quarter of the bytes; the default) or 'fp32' (engine/gpt2.h KvCacheFormat).
  // recording: a session whose forward passes a host runs (web/lib/gpu/gpu_session.js; fp32 cache).
  createSession({ useKVCache = true, kvCache = 'int8', recording = false } = {}) {
    const handle = this.call((model) => this.engine.construct((module) =>
      new module.Session(model, Boolean(useKVCache), String(kvCache), Boolean(recording))));
    return new EngineSession(this.engine, handle, this.config);
  }
}

// One generation's state: KV cache and sampler (embind Session).
export class EngineSession extends EngineObject {
  #contextSize;
  #vocabSize;

  // config: the model's ({ n_ctx, n_vocab })
  constructor(engine, handle, { n_ctx, n_vocab }) {
    super(engine, handle, 'session');
    this.#contextSize = n_ctx;
    this.#vocabSize = n_vocab;
  }

  // The settings as normalizeGenerateOptions checks them, except badWords: token id sequences only (generate()
  // encodes the texts), and eosToken: the id minNewTokens holds back; missing ones (or undefined) take the engine's
  // defaults (engine.constants.samplingDefaults). The seed must be an integer in [0, 2^53): it crosses exactly as a
  // double.
  setSampling(options = {}) {
    const settings = { ...this.engine.constants.samplingDefaults };
    for (const name of Object.keys(settings)) if (options[name] !== undefined) settings[name] = options[name];
    const { seed } = settings;
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed must be a non-negative integer, got ${seed}`);
    settings.logitBias = Object.entries(settings.logitBias).map(([token, bias]) => [Number(token), bias]);
    // The engine refuses a number it cannot take as given (the field named), and a value outside its range.
    this.checkedCall((session) => session.setSampling(settings), (set) => !set);
  }

  // Clears the session, feeds the prompt ids (Array or typed array) and returns the sampled next token id. Only the
  // newest n_ctx ids cross into the engine, which keeps no more of a longer prompt: a prompt of any length costs
  // the wasm heap at most n_ctx ids.
  prefill(ids) {
    return this.#prefill(ids, false);
  }

  // prefill() that keeps the longest common prefix of the session's window and the newest n_ctx ids in the
  // cache (at most all but the last id) and feeds only the rest: the same next token as prefill(ids).
  // reusedTokens then says how many positions were kept (0 for a session without a KV cache).
  prefillReusing(ids) {
    return this.#prefill(ids, true);
  }

  #prefill(ids, reuse) {
    const window = this.#newestWindow(ids, reuse ? 'prefillReusing' : 'prefill');
    return this.checkedCall((session) => session.prefill(window, reuse), (token) => token < 0);
  }

  // The halves of prefill/prefillReusing (reuse) and step, as the engine's session is fed: a recording session's host
  // runs the recorded pass in between, writes the logits (hostLogits) and then samples.
  feedPrompt(ids, reuse) {
    const window = this.#newestWindow(ids, reuse ? 'prefillReusing' : 'prefill');
    this.checkedCall((session) => session.feedPrompt(window, Boolean(reuse)), (fed) => !fed);
  }

  feedStep(id) {
    checkTokenId(id);
    this.checkedCall((session) => session.feedStep(id), (fed) => !fed);
  }

  // Runs the last recorded pass on the CPU with cpuModel's weights (an EngineModel of the same model), for a host
  // whose GPU was lost.
  runOnCpu(cpuModel) {
    this.checkedCall((session) => cpuModel.call((model) => session.runOnCpu(model)), (ran) => !ran);
  }

  get batchRows() {
    return this.call((session) => session.batchRows());
  }

  get reusedTokens() {
    return this.call((session) => session.reusedTokens());
  }

  // Log-probabilities of ids[1..] (at least 2 ids; all of them cross into the engine), each given the ids
  // before it, in windows of n_ctx with stride n_ctx/2 (engine/decoding/scorer.h Scorer::score): { logprobs: number[],
  // ranks: number[] (1 = the likeliest token), alternatives: [[token, logprob, token, logprob, ...] (topK
  // pairs, likeliest first) per scored id] }; topK at most vocabSize. The session's window is then the last
  // window scored.
  score(ids, topK = 0) {
    const k = checkScoreArguments(ids, topK);
    this.checkedCall((session) => session.score(ids, k), (scored) => !scored);
    return this.scoreResult();
  }

  // score() pass by pass, for a recording session's host: beginScore, then while feedScorePass() fed a pass, the
  // host runs it (its rows of logits into allLogits) and scoreFedPass(); then scoreResult() is score()'s result.
  beginScore(ids, topK = 0) {
    const k = checkScoreArguments(ids, topK);
    this.checkedCall((session) => session.beginScore(ids, k), (begun) => !begun);
  }

  // -> whether a pass was fed (false once every id is scored)
  feedScorePass() {
    return this.checkedCall((session) => session.feedScorePass(), (fed) => fed < 0) === 1;
  }

  scoreFedPass() {
    this.checkedCall((session) => session.scoreFedPass(), (scored) => !scored);
  }

  scoreResult() {
    return this.call((session) => session.scoreResult());
  }

  // The model's vocabulary size (n_vocab): the most alternatives a position has.
  get vocabSize() {
    return this.#vocabSize;
  }

  // Feeds one token and returns the sampled next token id.
  step(id) {
    checkTokenId(id);
    return this.checkedCall((session) => session.step(id), (token) => token < 0);
  }

  // Speculative decoding (engine/decoding/speculation.h Speculation::step): feeds id and verifies the drafted ids in one batched
  // pass -> the sampled tokens, the accepted drafts and then the model's own (at least one), as step() one at a
  // time would give them.
  stepDraft(id, draft) {
    checkTokenId(id);
    for (const token of draft) checkTokenId(token);
    return this.checkedCall((session) => session.stepDraft(id, draft), (tokens) => tokens === null);
  }

  // Samples a token from the last fed position's logits with the current settings (Session::sample).
  sample() {
    return this.checkedCall((session) => session.sample(), (token) => token < 0);
  }

  // Makes this session continue from other's window, with a copy of its KV cache (Sequences::fork).
  forkFrom(other) {
    this.checkedCall((session) => other.call((from) => session.forkFrom(from)), (forked) => !forked);
  }

  // Feeds ids[i] to sessions[i] (sessions[0] this one) in one batched pass -> the token each samples next, as each
  // one's step() would (Sequences::step).
  stepSequences(sessions, ids) {
    if (sessions[0] !== this) throw new Error('stepSequences: this session must come first');
    ids.forEach(checkTokenId);
    const handles = sessions.map((sequence) => sequence.call((handle) => handle));
    return this.checkedCall((leader) => leader.stepSequences(handles, ids), (tokens) => tokens === null);
  }

  // Beam search over sessions (this one first, one per beam; engine/decoding/beam_search.h), started on the prompt
  // ids -> EngineBeamSearch. earlyStopping: false, true or 'never' (Hugging Face's, in the order of the engine's
  // codes). The sessions must outlive it.
  beamSearch(sessions, { numBeams, lengthPenalty, earlyStopping, maxNewTokens, eosToken }, ids) {
    if (sessions[0] !== this) throw new Error('beamSearch: this session must come first');
    ids.forEach(checkTokenId);
    const stopping = this.engine.constants.enums.earlyStopping[earlyStopping === 'never' ? 2 : earlyStopping ? 1 : 0];
    const handles = sessions.map((beam) => beam.call((handle) => handle));
    return new EngineBeamSearch(this.engine, this.engine.construct((module) =>
      new module.BeamSearch(handles, numBeams, lengthPenalty, stopping, maxNewTokens, eosToken, Array.from(ids))));
  }

  // An inspection of this session's passes (engine/inspection/inspector.h): request { positions, layers, heads,
  // topK, logitLens } (arrays of integers, ascending; positions [] for the last one fed) as the engine takes it.
  // Then inspectPrompt / inspectStep feed and sample as prefillReusing (reuse) or prefill, and step, do (the same
  // tokens), and inspection() reads what the call's pass showed, until endInspection().
  inspect({ positions, layers, heads, topK, logitLens }) {
    this.checkedCall((session) => session.inspect(positions, layers, heads, topK, Boolean(logitLens)), (set) => !set);
  }

  inspectPrompt(ids, reuse) {
    const window = this.#newestWindow(ids, reuse ? 'prefillReusing' : 'prefill');
    return this.checkedCall((session) => session.inspectPrompt(window, Boolean(reuse)), (token) => token < 0);
  }

  inspectStep(id) {
    checkTokenId(id);
    return this.checkedCall((session) => session.inspectStep(id), (token) => token < 0);
  }

  // -> { name: a copy of the array, or a number } of the last inspected call (Inspector's results, named as
  // engine/host/host_api.cpp's inspection_views names them)
  inspection() {
    return this.call((session) => {
      const out = {};
      for (const [name, value] of Object.entries(session.inspection())) out[name] = typeof value === 'number' ? value : value.slice();
      return out;
    });
  }

  endInspection() {
    this.call((session) => session.endInspection());
  }

  // Prompt lookup's draft after id (Speculation::lookup_draft): at most maxDraft ids, [] when the context gives none.
  lookupDraft(id, maxDraft) {
    checkTokenId(id);
    return this.call((session) => session.lookupDraft(id, maxDraft));
  }

  // Testing build only: Float32Array of the last fed position's raw logits, over the heap: read it before the
  // next call.
  logits() {
    return this.call((session) => session.logits());
  }

  // { probability, alternatives: [{ token, probability }] (the topK likeliest; all of them for a topK of
  // vocabSize or more) } under softmax(logits) of the last fed position, or (row >= 0) of the position that
  // sampled the row-th token of the last stepDraft.
  distribution(token, topK = 0, row = -1) {
    return this.call((session) => session.distribution(token, Math.min(topK, this.#vocabSize), row));
  }

  reset() {
    this.call((session) => session.reset());
  }

  get nCached() {
    return this.call((session) => session.nCached());
  }

  get kvCache() {
    return this.call((session) => session.kvCache());
  }

  get kvCacheBytes() {
    return this.call((session) => session.kvCacheBytes());
  }

  // The newest n_ctx of ids (checked): a prompt of any length costs the wasm heap at most n_ctx ids.
  #newestWindow(ids, what) {
    if (ids.length === 0) throw new Error(`${what}: no token ids given`);
    for (const id of ids) checkTokenId(id);
    return ids.length > this.#contextSize ? ids.slice(ids.length - this.#contextSize) : ids;
  }
}

// A beam search (embind BeamSearch) over its sessions, started: step() until it is done, then results().
export class EngineBeamSearch extends EngineObject {
  constructor(engine, handle) {
    super(engine, handle, 'beam search');
  }

  // One step of the search -> true while it runs, false once it is done.
  step() {
    return this.checkedCall((search) => search.step(), (status) => status < 0) === 1;
  }

  // Ends the search now: the running beams become hypotheses.
  finish() {
    this.call((search) => search.finish());
  }

  // The search's hypotheses, best first: [{ tokens, score, endedByEos }].
  results() {
    return this.call((search) => search.results());
  }
}

// score's ids and topK checked as far as the engine cannot: -> topK as it crosses into the engine, which names a
// topK over the vocabulary (one past int32 would wrap on its way there).
function checkScoreArguments(ids, topK) {
  for (const id of ids) checkTokenId(id);
  if (!Number.isInteger(topK) || topK < 0) throw new Error(`score: topK must be an integer >= 0, got ${topK}`);
  return Math.min(topK, 2 ** 31 - 1);
}

// Range checks happen in the engine (its message names the range); this only rejects non-integers, which
// embind would otherwise truncate silently.
function checkTokenId(id) {
  if (!Number.isInteger(id)) throw new Error(`token id must be an integer, got ${id}`);
}
