// The files of a model: a folder in the Hugging Face layout, or one GGUF file (weights, hyper-parameters and
// tokenizer in one), recognized by its name.
import { resolveAgainstPage } from '../environment.js';

export const MODEL_FILES = Object.freeze({
  config: 'config.json',
  weights: 'model.safetensors',
  vocab: 'vocab.json',
  merges: 'merges.txt',
});

// The Hugging Face Hub, and the URL of a file of a repository's main branch there ('' names the folder).
// hub: the Hub's address ending in '/' ($HF_ENDPOINT for the CLI); file: one URL path segment, encoded.
export const HUGGING_FACE_HUB = 'https://huggingface.co/';
export function hubFileUrl(repository, file = '', hub = HUGGING_FACE_HUB) {
  return `${hub}${repository}/resolve/main/${file}`;
}

// The name the engine's GGUF messages start with ("model.gguf: …"), replaced by the file's own name.
export const ENGINE_GGUF_NAME = 'model.gguf';

// Whether a file name (or a URL path) is a GGUF file's: it ends in .gguf, in any case.
export function isGgufName(name) {
  return typeof name === 'string' && /\.gguf$/i.test(name);
}

// The schemes a model may be fetched from: the network, and Blob URLs that a page made of its own files.
const MODEL_URL_SCHEMES = new Set(['http:', 'https:', 'blob:']);

// A model's URL as resolveAgainstPage reads it; also a TypeError for another scheme (javascript:, data:, file: …).
export function resolveModelUrl(text) {
  const url = resolveAgainstPage(text);
  if (!MODEL_URL_SCHEMES.has(url.protocol)) {
    throw new TypeError(`a model URL must be http:, https: or blob:, not ${url.protocol} (${String(text).slice(0, 60)})`);
  }
  return url;
}

// What a model's URL names: a URL whose path ends in .gguf is that one file; any other is a folder, its last
// slash added when missing (so that a folder has one URL however it is spelled). -> { url (a new URL), gguf }
export function modelLocation(modelUrl) {
  const url = new URL(modelUrl);
  const gguf = isGgufName(url.pathname);
  if (!gguf && !url.pathname.endsWith('/')) url.pathname += '/';
  return { url, gguf };
}

// The file URLs of the model at a URL (see modelLocation): one GGUF file ({ model }), or a folder of the
// MODEL_FILES ({ config, weights, vocab, merges }). -> { format: 'gguf' | 'safetensors', urls: { key: href } }
export function modelFileUrls(modelUrl) {
  const { url, gguf } = modelLocation(modelUrl);
  if (gguf) return { format: 'gguf', urls: { model: url.href } };
  return {
    format: 'safetensors',
    urls: Object.fromEntries(Object.entries(MODEL_FILES).map(([key, name]) => [key, new URL(name, url).href])),
  };
}
