// The public API used as docs/api.md and docs/embedding.md show it, type-checked against
// web/lib/gpt2.d.ts, web/lib/tokenizer.d.ts and web/lib/widget.d.ts (tests/js/types.test.js runs tsc on it; it never runs).
// Each `@ts-expect-error` line is a wrong use the declarations must reject: tsc fails if it is accepted.
import {
  ModelLoadError,
  type AdapterInfo,
  configure,
  createEngineWorker,
  deleteCachedModel,
  listCachedModels,
  loadModel,
  type CachedModel,
  type EngineAbortedError,
  type Generation,
  type GenerationStats,
  type LoadProgress,
  type Model,
  type Piece,
  type ScoreResult,
  type StopReason,
} from '../../web/lib/gpt2.js';
import { createTokenizer, createTokenizerFromVocabulary, type Tokenizer } from '../../web/lib/tokenizer.js';

export async function generateAndScore(signal: AbortSignal): Promise<string> {
  const model = await loadModel('models/tiny-shakespeare/', {
    onProgress: ({ file, loaded, total, fraction, bytesPerSecond, secondsLeft, notCached }: LoadProgress) => {
      const percent = fraction === null ? '?' : `${Math.round(fraction * 100)} %`;
      const speed = bytesPerSecond === null ? '' : `${bytesPerSecond} B/s, ${secondsLeft ?? '?'} s left`;
      console.log(file, loaded, total ?? '?', percent, speed, notCached ?? 'cached');
    },
    signal,
    weights: 'int8',
    threads: 'auto',
    device: 'auto',
  });
  const { n_ctx, n_vocab } = model.config;
  console.log(n_ctx, n_vocab, model.weightBytes, model.weightTypes.split(', '), model.threads, describeDevice(model));

  const run: Generation = model.generate('ROMEO:', {
    maxNewTokens: 64, temperature: 0.8, topK: 40, topP: 0.95, repetitionPenalty: 1.1, seed: 42,
    stop: ['\n\n'], useKVCache: true, kvCache: 'int8', signal, topAlternatives: 5, stopAtEndOfText: true,
  });
  const tokensSoFar: number[] = [];
  let text = '';
  for await (const piece of run) {
    text += piece.text;
    if (piece.token !== null) tokensSoFar.push(piece.token);
    const likeliest = piece.alternatives?.[0];
    if (likeliest) console.log(piece.position, piece.ms, piece.probability, likeliest.token, likeliest.text, likeliest.probability);
  }
  describeStats(run.stats);

  const more = model.generate([...await model.encode('ROMEO:'), ...tokensSoFar], { stop: 'JULIET:', kvCache: 'fp32' });
  for await (const piece of more) text += piece.text;
  const fromTypedIds = model.generate(Uint32Array.from(tokensSoFar), { useKVCache: false });
  const beams = model.generate('ROMEO:', { temperature: 0, numBeams: 4, numReturnSequences: 2, lengthPenalty: 0.8, earlyStopping: 'never' });
  for await (const piece of beams) if (piece.sequence === 0) text += piece.text;
  for (const { tokens: beamTokens, text: beamText, score, stopReason } of beams.sequences) console.log(beamTokens.length, beamText, score, stopReason);
  text += (await firstPiece(fromTypedIds))?.text ?? '';

  const { tokens, totalLogprob, perplexity }: ScoreResult = await model.score('To be, or not to be', { topAlternatives: 5 });
  for (const { token, text: tokenText, logprob, rank, alternatives } of tokens) {
    console.log(token, tokenText, logprob, rank, alternatives.map((a) => `${a.text} ${a.token} ${a.logprob}`));
  }
  console.log(totalLogprob, perplexity, await model.decode(tokensSoFar));
  const exact: ScoreResult = await model.score('To be', { kvCache: 'fp32' });
  console.log(exact.perplexity);

  await model.whenUsable();
  await model.dispose();
  return text;
}

async function firstPiece(generation: Generation): Promise<Piece | undefined> {
  for await (const piece of generation) return piece;
  return undefined;
}

function describeStats(stats: GenerationStats): string {
  const { promptTokens, reusedTokens, generatedTokens, prefillMs, decodeTokensPerSecond, contextUsed, contextSize,
    kvCacheBytes, kvCache, device, deviceLost } = stats;
  console.log(promptTokens, reusedTokens, generatedTokens, prefillMs, decodeTokensPerSecond, contextUsed, contextSize,
    kvCacheBytes, kvCache?.toUpperCase(), device === 'webgpu' ? 'GPU' : 'CPU', deviceLost?.length ?? 0);
  return stats.stopReason === null ? 'running' : describeStopReason(stats.stopReason);
}

// Where a model runs, as a status line says it.
function describeDevice({ device, adapterInfo, deviceReason }: Model): string {
  const adapter = (info: AdapterInfo): string => `${info.description || info.vendor} (${info.architecture})${info.software ? ', software' : ''}`;
  switch (device) {
    case 'webgpu': return `on the GPU: ${adapterInfo === null ? 'unknown' : adapter(adapterInfo)}`;
    case 'wasm': return `on the CPU${deviceReason === null ? '' : ` because ${deviceReason.toLowerCase()}`}${adapterInfo?.isFallbackAdapter ? ' (fallback adapter)' : ''}`;
    default: return unreachable(device);
  }
}

function describeStopReason(reason: StopReason): string {
  switch (reason) {
    case 'eos': return 'end of text';
    case 'stop': return 'a stop string';
    case 'length': return 'maxNewTokens';
    case 'abort': return 'stopped';
    case 'error': return 'failed';
    default: return unreachable(reason);
  }
}

function unreachable(value: never): never {
  throw new Error(`unexpected ${String(value)}`);
}

// The engine's files from a CDN or a bundler's output folder, set before the first model loads.
export function useAssetsFrom(cdn: URL): void {
  configure({ assetBase: new URL('gpt2-wasm/', cdn) });
  configure({ assetBase: '/assets/gpt2-wasm/' });
}

// Models of one's own worker, local files, GGUF, and telling the errors apart.
export async function loadInOwnWorker(files: FileList, gguf: File, vocabJson: string): Promise<Model[]> {
  const worker = createEngineWorker();
  try {
    const models = [
      await loadModel(files, { worker }),
      await loadModel(gguf, { worker, threads: 4, device: 'webgpu' }),
      await loadModel(new URL('https://example.com/gpt2.Q4_K_M.gguf'), { useWorker: false, device: 'wasm' }),
      await loadModel({ config: '{}', weights: new ArrayBuffer(8), vocab: vocabJson, merges: new Blob(['']) }),
    ];
    return models;
  } catch (error) {
    if (error instanceof ModelLoadError) console.log(error.file, error.kind === 'network', error.message);
    else if (error instanceof Error && error.name === 'EngineAbortedError') console.log((error as EngineAbortedError).reason);
    throw error;
  } finally {
    worker.terminate();
  }
}

// The models the browser keeps, their sizes, and deleting the incomplete ones.
export async function tidyStoredModels(): Promise<CachedModel[]> {
  const models = await listCachedModels();
  for (const { source, files, bytes, complete } of models) {
    console.log(source, (bytes / 1e6).toFixed(1), files.map(({ url, bytes: fileBytes }) => `${url} ${fileBytes}`));
    if (!complete && await deleteCachedModel(source)) console.log('deleted', source);
  }
  await deleteCachedModel(new URL('https://example.com/gpt2.Q4_K_M.gguf'));
  return models;
}

export function tokenize(vocab: Record<string, number>, merges: string, ggufTokens: string[]): Tokenizer[] {
  const tokenizer = createTokenizer(vocab, merges);
  const ids = tokenizer.encode('Hello world');
  const decoder = tokenizer.createDecoder();
  console.log(tokenizer.decode(ids), tokenizer.decode(new Int32Array(ids)), ids.map((id) => decoder.push(id)).join('') + decoder.flush(),
    tokenizer.eosId, tokenizer.vocabSize);
  const fromGguf = createTokenizerFromVocabulary({ tokens: ggufTokens, merges: merges.split('\n'), eosTokenId: 50256 });
  return [tokenizer, fromGguf];
}

export function embed(element: HTMLElement): void {
  const widget = GPT2Widget.mount(element, {
    model: 'https://example.com/gpt2.Q4_K_M.gguf', prompt: 'ROMEO:', maxNewTokens: 60, temperature: 0.8, topK: 40,
    topP: 1, repetitionPenalty: 1, seed: 7, stop: ['\n\n'], autoGenerate: true, lazy: false, theme: 'dark', device: 'wasm',
  });
  void widget.generate().then(() => widget.stop());
  console.log(widget.element === element);
  widget.destroy();
  for (const placeholder of window.GPT2Widget.mountAll(document.body)) placeholder.destroy();
  GPT2Widget.mountAll();
}

// Wrong uses, each rejected.
export function wrongUses(model: Model, element: HTMLElement, stats: GenerationStats): void {
  // @ts-expect-error a prompt is a text or token ids, not one number
  model.generate(42);
  // @ts-expect-error an unknown option name
  model.generate('ROMEO:', { maxTokens: 20 });
  // @ts-expect-error the KV cache is 'int8' or 'fp32'
  model.generate('ROMEO:', { kvCache: 'int4' });
  // @ts-expect-error earlyStopping is true, false or 'never'
  model.generate('ROMEO:', { numBeams: 2, earlyStopping: 'always' });
  // @ts-expect-error score takes topAlternatives and kvCache only
  void model.score('text', { temperature: 0 });
  // @ts-expect-error the KV cache is 'int8' or 'fp32'
  void model.score('text', { kvCache: 'fp16' });
  // @ts-expect-error weights are 'fp32' or 'int8'
  void loadModel('models/tiny-shakespeare/', { weights: 'int4' });
  // @ts-expect-error the devices are 'auto', 'webgpu' and 'wasm'
  void loadModel('models/tiny-shakespeare/', { device: 'gpu' });
  // @ts-expect-error a model runs on 'webgpu' or 'wasm': 'auto' is only what one asks for
  if (model.device === 'auto') console.log('never');
  // @ts-expect-error the adapter may be null (no WebGPU, or the CPU asked for)
  console.log(model.adapterInfo.vendor);
  // @ts-expect-error the model's device is read-only
  model.device = 'wasm';
  // @ts-expect-error a progress callback, not a flag
  void loadModel('models/tiny-shakespeare/', { onProgress: true });
  // @ts-expect-error a stored model is deleted by its URL, not by its listing
  void listCachedModels().then(([first]) => deleteCachedModel(first));
  // @ts-expect-error the asset folder is a URL, not a list of files
  configure({ assetBase: ['gpt2.wasm'] });
  // @ts-expect-error a run's passes run on 'webgpu' or 'wasm'
  if (stats.device === 'auto') console.log('never');
  // @ts-expect-error no such stop reason
  if (stats.stopReason === 'done') console.log('never');
  // @ts-expect-error widget themes are auto, light and dark
  GPT2Widget.mount(element, { theme: 'blue' });
  // @ts-expect-error the widget has no such option
  GPT2Widget.mount(element, { kvCache: 'fp32' });
  // @ts-expect-error widget devices are auto, webgpu and wasm
  GPT2Widget.mount(element, { device: 'cpu' });
}
