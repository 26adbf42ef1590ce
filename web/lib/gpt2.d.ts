// TypeScript declarations of gpt2.js, the public API (its header, generate.js, score.js, loader.js and
// errors.js say what each value means). Checked against tests/types/example.ts by tests/js/types.test.js.
// They use the DOM library's Blob, File, FileList and AbortSignal.
import type { TokenIds } from './tokenizer.js';

export type { TokenIds };

/** A model: the URL (or Node path) of a folder in the Hugging Face layout or of a .gguf file, or local files. */
export type ModelSource =
  | string
  | URL
  | LocalModelFiles
  | Blob
  | ArrayBuffer
  | ArrayBufferView
  | readonly Blob[]
  | FileList;

/** A folder's files given one by one; a string is the file's text. */
export interface LocalModelFiles {
  config: LocalFile;
  weights: LocalFile;
  vocab: LocalFile;
  merges: LocalFile;
}

export type LocalFile = Blob | ArrayBuffer | ArrayBufferView | string;

export type WeightFormat = 'fp32' | 'int8';

export type KvCacheFormat = 'int8' | 'fp32';

/**
 * Where the forward pass runs: 'auto' takes a hardware WebGPU adapter where it decodes the model faster (never a
 * software one, such as SwiftShader) and otherwise the CPU; 'webgpu' the GPU, a one-line error ("device 'webgpu': …")
 * where there is no adapter or the model's weights do not run there; 'wasm' the CPU.
 */
export type Device = 'auto' | 'webgpu' | 'wasm';

/** The WebGPU adapter a model found (its GPUAdapterInfo, and whether it renders in software). */
export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter: boolean;
  /** a software renderer (SwiftShader, lavapipe, llvmpipe), which 'auto' never uses */
  software: boolean;
}

export interface LoadOptions {
  onProgress?: (event: LoadProgress) => void;
  /** Cancels the load (an AbortError). */
  signal?: AbortSignal;
  /** Defaults to true where `window` exists. */
  useWorker?: boolean;
  /** A worker of one's own (createEngineWorker); implies useWorker. */
  worker?: EngineWorker;
  /** 'int8' quantizes a safetensors model on load; with a GGUF file it is a TypeError. */
  weights?: WeightFormat;
  /** 'auto' (the default in browsers) or a count from 1 to 16 (the default in Node: 1). */
  threads?: 'auto' | number;
  /** 'auto' */
  device?: Device;
}

/** One progress event of the file being read, at most one per 100 ms, and one at its start and end. */
export interface LoadProgress {
  file: string;
  loaded: number;
  /** null while the size is unknown */
  total: number | null;
  /** null while the size is unknown */
  fraction: number | null;
  /** null until measurable */
  bytesPerSecond: number | null;
  /** null until measurable */
  secondsLeft: number | null;
  /** the file is being copied into the Cache API */
  caching: boolean;
  /** a broken download is about to be retried */
  retry?: { attempt: number; delayMs: number };
  /** after the model loaded: why the Cache API did not keep it (e.g. a full quota) */
  notCached?: string;
}

/** The engine's gpt2::Config. */
export interface ModelConfig {
  n_vocab: number;
  n_ctx: number;
  n_embd: number;
  n_head: number;
  n_layer: number;
  layer_norm_epsilon: number;
}

/** An empty text or array starts from <|endoftext|>; token ids are integers in [0, n_vocab). */
export type Prompt = string | TokenIds;

/**
 * The ranges are docs/api.md's table of options (web/lib/generation/option_table.js): integers that reach the
 * engine at most 2147483647, other numbers finite with |x| <= FLT_MAX (3.4028234663852886e38); a value outside its
 * range is a RangeError naming the option, never narrowed into another. Each comment ends with the default;
 * tests/js/option_surfaces.test.js holds the ranges and defaults here to the table.
 */
export interface GenerateOptions {
  /** an integer in [1, 2^53), with numBeams > 1 at most the model's context; 64 */
  maxNewTokens?: number;
  /** in [0, FLT_MAX], 0 = greedy; 1 */
  temperature?: number;
  /** an integer in [0, 2147483647], 0 = off; 0 */
  topK?: number;
  /** in [0, 1], 1 = off, 0 = the likeliest token only; 1 */
  topP?: number;
  /** in (0, FLT_MAX], 1 = off; 1 */
  repetitionPenalty?: number;
  /** in [0, 1]: drops tokens below minP times the likeliest one's probability, 0 = off; 0 */
  minP?: number;
  /** in [0, 1]: locally typical sampling, 1 = off; 1 */
  typicalP?: number;
  /** an integer in [0, 2147483647]: bans the token that would repeat an n-gram of the window, 0 = off; 0 */
  noRepeatNgramSize?: number;
  /** in [-FLT_MAX, FLT_MAX], OpenAI's: subtracted once from each token this run generated; 0 */
  presencePenalty?: number;
  /** in [-FLT_MAX, FLT_MAX], OpenAI's: subtracted once per occurrence among the tokens this run generated; 0 */
  frequencyPenalty?: number;
  /** token id (within the vocabulary) -> in [-FLT_MAX, FLT_MAX] added to its logit, -Infinity bans it; {} */
  logitBias?: Readonly<Record<number, number>>;
  /** never produced: a text (as its tokens, with and without a leading space) or token ids; [] */
  badWords?: readonly (string | readonly number[])[];
  /** an integer in [0, 2147483647]: end-of-text is held back until this many new tokens; 0 */
  minNewTokens?: number;
  /** an integer in [0, 2^53); random */
  seed?: number;
  /** non-empty strings: generation ends before the first one in the text; [] */
  stop?: string | readonly string[];
  /** true */
  stopAtEndOfText?: boolean;
  /** true */
  useKVCache?: boolean;
  /** the KV cache's storage, 'int8' (a quarter of the bytes) or 'fp32'; 'int8' */
  kvCache?: KvCacheFormat;
  /** ends the generation with stopReason 'abort' */
  signal?: AbortSignal;
  /** an integer in [0, 2147483647], at most the model's vocabulary: gives each piece its probability and this many likeliest alternatives; 0 */
  topAlternatives?: number;
  /** speculative decoding: drafted tokens verified several per pass, the text unchanged; off */
  speculative?: SpeculativeOptions;
  /**
   * sequences sampled from one prefill (the others fork its KV cache) and decoded together, the weights read once
   * per step for all; sequence i samples with seed + i; in [1, 16], > 1 needs temperature > 0, the KV cache and
   * no speculation; 1
   */
  numReturnSequences?: number;
  /**
   * beam search with Hugging Face's semantics: an integer in [1, 16], 1 = off; deterministic at temperature 0,
   * beam sampling above it; numReturnSequences at most numBeams; needs the KV cache and no speculation. The text
   * comes when the search ends; 1
   */
  numBeams?: number;
  /** in [-FLT_MAX, FLT_MAX], beam search: a hypothesis scores its log-probabilities' sum / length ^ lengthPenalty (end-of-text counted); 1 */
  lengthPenalty?: number;
  /**
   * beam search ends once numBeams hypotheses have ended and: false, no running beam is likely to beat them (a
   * heuristic); true, at once; 'never', none can (with lengthPenalty > 0, scored at maxNewTokens); false
   */
  earlyStopping?: boolean | 'never';
  /**
   * each new token's inspection (what the pass that drew it computed, and how the sampler drew it) as its piece's
   * `inspection`; one token per step: not with speculative, numBeams or numReturnSequences > 1. On a GPU model the
   * run goes on the CPU engine (the GPU's passes show only logits); true for the defaults; off
   */
  inspect?: boolean | InspectGenerationOptions;
}

/** What an inspection looks at. The lists are ascending without repeats, within the model's layers and heads. */
export interface InspectGenerationOptions {
  /** the layers looked inside, from 0; all */
  layers?: readonly number[];
  /** the attention heads whose attention and KV rows are shown; all ([] for none) */
  heads?: readonly number[];
  /** an integer in [1, 64]: the logit lens's and the sampler trace's tokens per entry; 5 */
  topK?: number;
  /** each layer's best guesses at the next token: an LM head per layer and position, the costly part; true */
  logitLens?: boolean;
}

export interface InspectOptions extends InspectGenerationOptions {
  /** the window positions looked at, from 0, below the input's length in tokens (its newest n_ctx); the last */
  positions?: readonly number[];
  /** the KV cache's storage, 'int8' or 'fp32'; 'int8' */
  kvCache?: KvCacheFormat;
}

export interface LensEntry {
  id: number;
  text: string;
  /** the logit of the residual stream after the layer through the final layernorm and the LM head */
  logit: number;
  /** its softmax at temperature 1 */
  probability: number;
}

export interface BlockNorms {
  /** L2 norm of what the attention block added to the residual stream */
  attention: number;
  /** L2 norm of what the MLP block added */
  mlp: number;
  /** L2 norm of the residual stream after the layer */
  residual: number;
  /** per head asked: the L2 norms of the position's query, key and value */
  heads: { query: number; key: number; value: number }[];
}

export interface CacheEvent {
  /** positions [first, first + count) were: cleared for a new prompt, kept from before, rolledBack (the new prompt
   * differs from them), slid (dropped as a full window moved its newest half to the front) or written */
  kind: 'cleared' | 'kept' | 'rolledBack' | 'slid' | 'written';
  first: number;
  count: number;
}

export interface KvCacheInspection {
  format: KvCacheFormat;
  /** positions 0..filled - 1 hold keys and values */
  filled: number;
  /** the window's positions, n_ctx */
  capacity: number;
  /** the whole cache's bytes (int8: with its scales) */
  bytes: number;
  bytesPerPosition: number;
  /** what the call did to the cache */
  events: CacheEvent[];
  /** rows[l][h][i]: the key and value rows position positions[i] holds in head heads[h] of layer layers[l], as the
   * attention reads them (int8 dequantized) */
  rows: { key: Float32Array; value: Float32Array }[][][];
}

export interface SamplerStage {
  /** in the sampler's order: logits, the processors (logitBias, repetitionPenalty, presenceFrequencyPenalty,
   * noRepeatNgramSize, badWords, minNewTokens), then greedy, or topK, temperature, topP, minP, typicalP, and the
   * distribution drawn from */
  name: string;
  /** whether its setting was on (logits and the distribution always run; greedy or the warpers) */
  ran: boolean;
  /** tokens still possible after it */
  candidates: number;
  /** what `top`'s values are: logits (up to topK) or probabilities (from temperature on; renormalized in the distribution) */
  values: 'logits' | 'probabilities';
  /** its likeliest tokens, at most topK */
  top: { id: number; text: string; value: number }[];
}

export interface SamplerTrace {
  stages: SamplerStage[];
  token: number;
  text: string;
  how: 'greedy' | 'sampled';
  /** the token's probability in the distribution drawn from (1 when greedy) */
  probability: number;
  /** sampled: the uniform number in [0, 1) whose inverse CDF over the distribution is the token; greedy: null */
  draw: number | null;
}

export interface Inspection {
  /** the window positions looked at */
  positions: number[];
  layers: number[];
  heads: number[];
  /** attention[l][h][i]: the probabilities (positions[i] + 1 of them, after the causal mask and the softmax) with which
   * position positions[i] attends to each position in head heads[h] of layer layers[l] */
  attention: Float32Array[][][];
  /** logitLens[l][i]: the topK likeliest tokens of the residual stream after layer layers[l] at positions[i] (after
   * the last layer: the model's own output); null with logitLens false */
  logitLens: LensEntry[][][] | null;
  /** blocks[l][i] */
  blocks: BlockNorms[][];
  kv: KvCacheInspection;
  /** where it ran: the CPU engine */
  device: 'wasm';
  /** on a GPU model: that the inspection ran the model's weights on the CPU engine */
  note?: string;
}

export interface InspectResult extends Inspection {
  /** the window's tokens (the input's newest n_ctx) */
  tokens: { id: number; text: string }[];
}

export interface PieceInspection extends Inspection {
  /** how the piece's token was drawn */
  sampler: SamplerTrace;
}

export interface SpeculativeOptions {
  /**
   * where drafts come from: 'prompt-lookup', n-grams of the context itself, or a draft model of the same
   * vocabulary loaded in the same thread (not a page's worker model), decoding greedily; 'prompt-lookup'
   */
  draft?: 'prompt-lookup' | Model;
  /** the most tokens drafted per step, in [1, 16]; the length adapts to the acceptance below it; 8 */
  maxDraftTokens?: number;
}

export type StopReason = 'eos' | 'stop' | 'length' | 'abort' | 'error';

export interface PieceAlternative {
  token: number;
  text: string;
  probability: number;
}

export interface Piece {
  /** decoded text, never half a character; '' for an id past the tokenizer's vocabulary */
  text: string;
  /** null for text left over at the end (the rest of an incomplete character) */
  token: number | null;
  /** null for text left over at the end */
  position: number | null;
  ms: number;
  /** with topAlternatives > 0 */
  probability?: number;
  /** with topAlternatives > 0 */
  alternatives?: PieceAlternative[];
  /** with numReturnSequences > 1: which sequence the piece belongs to, from 0 (beam search: 0 is the best) */
  sequence?: number;
  /** with inspect: the pass that drew the token, at the position it fed last, and the sampler's trace */
  inspection?: PieceInspection;
}

/** Live while the generation runs. */
export interface GenerationStats {
  promptTokens: number;
  /** prompt tokens whose KV cache was kept from the session's previous run */
  reusedTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeTokensPerSecond: number;
  contextUsed: number;
  contextSize: number;
  kvCacheBytes: number;
  /** null until the prompt is read */
  kvCache: KvCacheFormat | null;
  /** where the passes run: the model's device, or 'wasm' once a lost GPU made the run go on on the CPU; null until the prompt is read */
  device: 'webgpu' | 'wasm' | null;
  /** why the GPU was lost, if it was during this run; else null */
  deviceLost: string | null;
  /** speculative decoding: tokens drafted and verified */
  draftedTokens: number;
  /** of the drafted tokens, those the model's own tokens matched: each one a pass saved */
  acceptedTokens: number;
  /** null until finished */
  stopReason: StopReason | null;
}

/** Runs as it is iterated; leaving the loop early ends it with stopReason 'abort'. Iterate it once. */
export interface GeneratedSequence {
  tokens: number[];
  text: string;
  /**
   * the sum of its tokens' log-probabilities under the model; beam search: its hypothesis's score (the sum of its
   * beam scores, end-of-text included, / length ^ lengthPenalty)
   */
  score: number;
  stopReason: StopReason;
}

export interface Generation extends AsyncIterable<Piece> {
  readonly stats: GenerationStats;
  /** with numReturnSequences or numBeams > 1, once the run has ended: each sequence, in order (beam search: best first) */
  readonly sequences: GeneratedSequence[];
}

export interface ScoreOptions {
  /** an integer in [0, 2147483647], at most the model's vocabulary; 0 */
  topAlternatives?: number;
  /**
   * The KV cache's storage: 'int8' (as generate() uses: within a few 1e-3 nats of exact) or 'fp32' (four times the
   * cache's memory, within 1e-4 of a float64 reference: for perplexities that compare models); 'int8'
   */
  kvCache?: KvCacheFormat;
  /** stops the score between two of its passes: the promise rejects with an AbortError (a DOMException) */
  signal?: AbortSignal;
}

export interface ScoredAlternative {
  token: number;
  text: string;
  logprob: number;
}

export interface ScoredToken {
  token: number;
  text: string;
  /** natural log of its probability given the text before it */
  logprob: number;
  /** 1 = the likeliest */
  rank: number;
  alternatives: ScoredAlternative[];
}

/** An empty text: { tokens: [], totalLogprob: 0, perplexity: 1 }. */
export interface ScoreResult {
  tokens: ScoredToken[];
  totalLogprob: number;
  perplexity: number;
}

export interface Model {
  readonly config: ModelConfig;
  readonly weightBytes: number;
  /** "fp32", "int8", or a GGUF file's types, e.g. "q4_k, q6_k" */
  readonly weightTypes: string;
  /** the threads it got */
  readonly threads: number;
  /** why it runs on one thread where more were asked for ('auto' or a count): the page is not cross-origin isolated,
   * the browser gives no SharedArrayBuffer, one core, its cores could not be measured, or the engine's other threads
   * are held by another model; else null */
  readonly threadsReason: string | null;
  /** the CPU engine's wasm build: relaxed SIMD (fused multiply-add, 8-bit dot product) in browsers that run it (and
   * in Node with GPT2_WASM_SIMD=relaxed), else SIMD128 */
  readonly simd: 'relaxed' | 'simd128';
  /** where it runs: the GPU or the CPU */
  readonly device: 'webgpu' | 'wasm';
  /** the WebGPU adapter it found, also when it runs on the CPU; null where there was none or the CPU was asked for */
  readonly adapterInfo: AdapterInfo | null;
  /** why it runs on the CPU when that was not asked for ('auto'), else null */
  readonly deviceReason: string | null;
  generate(prompt: Prompt, options?: GenerateOptions): Generation;
  score(text: string, options?: ScoreOptions): Promise<ScoreResult>;
  /** What the model computes inside for the input's tokens, in one fresh pass over them on the CPU engine. */
  inspect(input: Prompt, options?: InspectOptions): Promise<InspectResult>;
  encode(text: string): Promise<number[]>;
  decode(ids: Iterable<number> | ArrayLike<number>): Promise<string>;
  /** Resolves once the model can run; rejects with why it cannot (load it again). */
  whenUsable(): Promise<void>;
  /** A model in a worker returns a Promise; one in this thread returns nothing. Its runs under way end as an abort of
   * their signal ends them: before their next token (several sequences, beams: their next step), with stopReason
   * 'abort' and no error; its later calls fail with "the model was disposed". */
  dispose(): void | Promise<void>;
}

/** A worker for several models, from createEngineWorker() (a type: gpt2.js exports no such class). */
declare class EngineWorker {
  #private;  // only createEngineWorker() makes one
  private constructor();
  /** Ends the worker and fails its models' calls. */
  terminate(): void;
}
export type { EngineWorker };

export function loadModel(source: ModelSource, options?: LoadOptions): Promise<Model>;

export function createEngineWorker(): EngineWorker;

export interface ConfigureOptions {
  /**
   * The URL of the folder with the engine's files, a copy of public/wasm/ (gpt2.wasm, gpt2.mjs, gpt2.cjs,
   * gpt2-mt.*, gpt2-worker.js): relative to the page in browsers, a file: URL in Node. Default: public/wasm/
   * found from the module's URL (wrong once bundled). Another value after the first model loaded throws.
   */
  assetBase?: string | URL;
}

/** Settings of this realm's engine and engine workers, before the first model loads. */
export function configure(options: ConfigureOptions): void;

/** A file of a stored model. */
export interface CachedFile {
  url: string;
  /** as checked when it is read back */
  bytes: number;
}

/** A model kept in the browser's Cache API by loadModel. */
export interface CachedModel {
  /** the URL that loads it: a folder's (ending in "/") or a .gguf file's */
  source: string;
  /** its files that are stored, in the model's order (config.json, model.safetensors, vocab.json, merges.txt) */
  files: CachedFile[];
  /** the files' bytes together */
  bytes: number;
  /** every file of the model is stored: loading it makes no request */
  complete: boolean;
}

/** The models in the Cache API, in the order they were stored; [] without one (Node, insecure pages). */
export function listCachedModels(): Promise<CachedModel[]>;

/**
 * Removes a model's files from the Cache API (a loaded copy keeps working; the next load downloads them).
 * source: as loadModel takes it or listCachedModels gives it. Resolves to whether anything was removed (false
 * without a Cache API).
 */
export function deleteCachedModel(source: string | URL): Promise<boolean>;

export type LoadErrorKind = 'network' | 'http' | 'missing' | 'invalid';

/** A model's file that could not be loaded (also when the model loads in a worker, the default in pages). */
export class ModelLoadError extends Error {
  constructor(file: string, kind: LoadErrorKind, message: string, options?: ErrorOptions);
  name: 'ModelLoadError';
  file: string;
  kind: LoadErrorKind;
}

/** What a call fails with when the engine aborted (e.g. out of memory); tell it by error.name. */
export interface EngineAbortedError extends Error {
  name: 'EngineAbortedError';
  /** what the engine said */
  reason: string;
}
