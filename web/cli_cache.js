// Where gpt2-wasm's --model comes from (web/cli.js): a local folder or .gguf path as it is; an http(s) URL or a
// Hugging Face repository id (owner/name, or owner/name/file.gguf: a file in it) downloaded once into a disk
// cache and loaded from there (resuming dropped connections: download.js). Each file is written under a temporary
// name and renamed when complete, so the cache never holds part of a file: a file there is a whole download, and
// a model whose files are all there is loaded without a request.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { DownloadRestart, startDownload } from './download.js';
import { MODEL_FILES, isGgufName } from './model_files.js';

const DEFAULT_HUB = 'https://huggingface.co';
const HUB_ID = /^[\w.-]+\/[\w.-]+(\/[^/]+\.gguf)?$/i;

// The cache folder: $GPT2_WASM_CACHE_DIR, else the platform's (%LOCALAPPDATA%, ~/Library/Caches, or
// $XDG_CACHE_HOME / ~/.cache), in a gpt2-wasm folder.
export function cacheDirectory(env = process.env, platform = process.platform, home = homedir()) {
  if (env.GPT2_WASM_CACHE_DIR) return env.GPT2_WASM_CACHE_DIR;
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'gpt2-wasm');
  if (platform === 'darwin') return join(home, 'Library', 'Caches', 'gpt2-wasm');
  return join(env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(home, '.cache'), 'gpt2-wasm');
}

// --model's text -> a local path, or the URL it names: an existing path wins over a Hub id of the same spelling.
// hub: the Hub's address ($HF_ENDPOINT, as Hugging Face's own tools read it).
export function resolveModelSource(text, hub = process.env.HF_ENDPOINT || DEFAULT_HUB) {
  if (/^https?:\/\//i.test(text)) return new URL(text);
  if (existsSync(text) || !HUB_ID.test(text)) return text;
  const [owner, name, ...file] = text.split('/');
  return new URL(`${hub.replace(/\/+$/, '')}/${owner}/${name}/resolve/main/${file.join('/')}`);
}

// A URL (from resolveModelSource) -> { path, evict() }: the folder or .gguf file on disk, downloading the files
// the cache lacks; evict() removes the model from the cache (its files turned out invalid).
// onProgress({ file, loaded, total (bytes or null), done }) while a file downloads.
export async function cachedModel(url, { cacheDir = cacheDirectory(), onProgress } = {}) {
  const folder = join(cacheDir, 'models', entryName(url));
  const evict = () => rm(folder, { recursive: true, force: true });
  if (isGgufName(url.pathname)) {
    const name = decodeURIComponent(url.pathname.slice(url.pathname.lastIndexOf('/') + 1));
    await ensureFile(url, join(folder, name), name, onProgress);
    return { path: join(folder, name), evict };
  }
  const base = url.pathname.endsWith('/') ? url : new URL(`${url.href.replace(/[?#].*$/, '')}/`);
  // The small files first, so that a wrong address fails before the weights download.
  for (const name of [MODEL_FILES.config, MODEL_FILES.vocab, MODEL_FILES.merges, MODEL_FILES.weights]) {
    await ensureFile(new URL(name, base), join(folder, name), name, onProgress);
  }
  return { path: `${folder}/`, evict };
}

// A readable, unique folder name for a URL: its host and path in safe characters, then a hash of the whole URL.
function entryName(url) {
  const readable = `${url.host}${url.pathname}`.replace(/[^\w.-]+/g, '_').replace(/^[._]+|[._]+$/g, '').slice(-80);
  return `${readable}-${createHash('sha256').update(url.href).digest('hex').slice(0, 12)}`;
}

async function ensureFile(url, path, name, onProgress) {
  if (existsSync(path)) return;
  await mkdir(join(path, '..'), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  try {
    await download(url, partial, name, onProgress);
    await rename(partial, path);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
}

// The file through download.js's startDownload, which resumes a broken connection with Range (a file of hundreds
// of MB, like the default GPT-2, need not start over) and gives up after repeated failures with a network error
// naming the file, the bytes reached and the attempts; a server that sends the whole file again restarts it here.
async function download(url, path, name, onProgress) {
  const { total, chunks } = await startDownload(name, url.href);
  const file = await open(path, 'w');
  let size = total;
  let loaded = 0;
  try {
    onProgress?.({ file: name, loaded, total: size, done: false });
    for await (const chunk of chunks) {
      if (chunk instanceof DownloadRestart) {
        await file.truncate(0);
        [size, loaded] = [chunk.total, 0];
      } else {
        await file.write(chunk, 0, chunk.byteLength, loaded);
        loaded += chunk.byteLength;
      }
      onProgress?.({ file: name, loaded, total: size, done: false });
    }
  } finally {
    await file.close();
  }
  onProgress?.({ file: name, loaded, total: loaded, done: true });
}
