// Where gpt2-wasm's --model comes from (web/cli/cli.js): a local folder or .gguf path as it is; an http(s) URL or a
// Hugging Face repository id (owner/name, or owner/name/file.gguf: a file in it) downloaded once into a disk
// cache and loaded from there (resuming dropped connections: download.js). Each file is written under a temporary
// name and renamed when complete, so the cache never holds part of a file: a file there is a whole download, and
// a model whose files are all there is loaded without a request.
//
// Every name written to disk comes from outside (a URL, a Hub id, a server), so each is checked to be one plain
// file name inside the model's entry folder before anything is written: the cache never writes elsewhere.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { DownloadRestart, startDownload } from '../lib/loading/download.js';
import { textFileByteBound } from '../lib/loading/file_sinks.js';
import { HUGGING_FACE_HUB, MODEL_FILES, hubFileUrl, modelFileUrls } from '../lib/loading/model_files.js';
import { pathSource, urlSource } from '../lib/loading/model_source.js';

// A Hugging Face repository id, by the Hub's own rule for owner and name: letters, digits, '-', '_' and '.', not
// starting or ending with '-' or '.', no '--' or '..', at most 96 characters; then optionally a .gguf file in it.
const HUB_NAME = String.raw`(?![^/]*(?:--|\.\.))[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?`;
const HUB_ID = new RegExp(`^${HUB_NAME}/${HUB_NAME}(/[^/]+\\.gguf)?$`, 'i');
// The longest file name kept in the cache, in UTF-8 bytes: most file systems allow 255, and the temporary
// name of a download adds ".PID.partial".
const MAX_FILE_NAME_BYTES = 200;
// Names that Windows gives to devices, with any extension.
const WINDOWS_DEVICE_NAME = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;

// The cache folder: $GPT2_WASM_CACHE_DIR (relative to the working folder), else the platform's (%LOCALAPPDATA%,
// ~/Library/Caches, or $XDG_CACHE_HOME / ~/.cache), in a gpt2-wasm folder.
export function cacheDirectory(env = process.env, platform = process.platform, home = homedir()) {
  if (env.GPT2_WASM_CACHE_DIR) {
    if (env.GPT2_WASM_CACHE_DIR.includes('\0')) throw new Error('GPT2_WASM_CACHE_DIR: the path holds a NUL character');
    return resolve(env.GPT2_WASM_CACHE_DIR);
  }
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'gpt2-wasm');
  if (platform === 'darwin') return join(home, 'Library', 'Caches', 'gpt2-wasm');
  return join(env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(home, '.cache'), 'gpt2-wasm');
}

// --model's text -> the model source it names (model_source.js): a local path, or a URL (a Hub id's is its folder
// or file on the Hub); an existing path wins over a Hub id of the same spelling. hub: the Hub's address
// ($HF_ENDPOINT, as Hugging Face's own tools read it).
export function resolveModelSource(text, hub = process.env.HF_ENDPOINT || HUGGING_FACE_HUB) {
  if (/^https?:\/\//i.test(text)) return urlSource(new URL(text).href);
  if (existsSync(text) || !HUB_ID.test(text)) return pathSource(text);
  const [owner, name, file = ''] = text.split('/');
  return urlSource(new URL(hubFileUrl(`${owner}/${name}`, encodeURIComponent(file), hubBase(hub))).href);
}

// $HF_ENDPOINT as a base URL ending in '/'; it must be an http(s) URL with no query or fragment.
function hubBase(hub) {
  let url;
  try {
    url = new URL(hub);
  } catch {
    url = null;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash) {
    throw new Error(`HF_ENDPOINT: expected an http(s) URL of a Hub, got ${JSON.stringify(hub)}`);
  }
  return url.href.replace(/\/*$/, '/');
}

// A URL's model source (from resolveModelSource) -> { path, evict() }: the folder or .gguf file on disk,
// downloading the files the cache lacks; evict() removes the model from the cache (its files turned out invalid).
// onProgress({ file, loaded, total (bytes or null), done }) while a file downloads.
export async function cachedModel(source, { cacheDir = cacheDirectory(), onProgress } = {}) {
  const url = new URL(source.url);
  const folder = join(cacheDir, 'models', entryName(url));
  const evict = () => rm(folder, { recursive: true, force: true });
  const { format, urls } = modelFileUrls(url);
  if (format === 'gguf') {
    const name = cachedFileName(url);
    await ensureFile(url, fileInFolder(folder, name), name, onProgress);
    return { path: join(folder, name), evict };
  }
  // The small files first, so that a wrong address fails before the weights download.
  for (const key of ['config', 'vocab', 'merges', 'weights']) {
    const name = MODEL_FILES[key];
    await ensureFile(new URL(urls[key]), fileInFolder(folder, name), name, onProgress);
  }
  return { path: `${folder}/`, evict };
}

// The name a .gguf URL's file is kept under: the last segment of the URL's path, percent-decoded, when it is one
// plain file name on every platform; else the URL is refused. The name is the one the user gave (a redirect or
// the server's headers never choose it).
export function cachedFileName(url) {
  const segment = url.pathname.slice(url.pathname.lastIndexOf('/') + 1);
  let name;
  try {
    name = decodeURIComponent(segment);
  } catch {
    throw new Error(`${shortened(url.href)}: the file name ${shortened(segment)} is not valid percent-encoding`);
  }
  const problem = fileNameProblem(name);
  if (problem) throw new Error(`${shortened(url.href)}: the file name ${shortened(JSON.stringify(name))} cannot be kept in the cache (${problem})`);
  return name;
}

// -> why name cannot be one file in a folder on Linux, macOS and Windows alike, or null when it can.
function fileNameProblem(name) {
  if (/[/\\]/.test(name)) return 'it holds a path separator';
  if (/\p{Cc}/u.test(name)) return 'it holds a control character';
  if (name === '' || name === '.' || name === '..') return 'it names a folder';
  if (Buffer.byteLength(name) > MAX_FILE_NAME_BYTES) return `it is over ${MAX_FILE_NAME_BYTES} bytes long`;
  if (/[<>:"|?*]/.test(name)) return 'it holds a character that Windows does not allow in file names';
  if (/[. ]$/.test(name)) return 'it ends in a dot or space, which Windows drops';
  if (WINDOWS_DEVICE_NAME.test(name)) return 'Windows reserves it for a device';
  return null;
}

// folder/name, checked to lie inside folder (the names are checked already: this holds whatever they become).
function fileInFolder(folder, name) {
  const path = join(folder, name);
  const inside = relative(folder, path);
  if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    throw new Error(`${name}: not a file name inside the cache`);
  }
  return path;
}

// A text from outside, cut for an error line.
function shortened(text) {
  return text.length > 120 ? `${text.slice(0, 120)}… (${text.length} characters)` : text;
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
// The text files (config.json, vocab.json, merges.txt) are bounded as the loader bounds them, so a server cannot
// fill the disk with one.
async function download(url, path, name, onProgress) {
  const bound = textFileByteBound(name);
  const { total, chunks, cancel } = await startDownload(name, url.href);
  // Refused from the announced size before a byte is written, else as soon as the bytes pass the bound.
  const checkSize = (bytes) => {
    if (bound === null || bytes <= bound.bytes) return;
    cancel();
    throw new Error(`${name}: ${bytes === size ? bytes : `over ${bound.bytes}`} bytes from ${url.href}; ${bound.limit}`);
  };
  let size = total;
  let loaded = 0;
  checkSize(size ?? 0);
  const file = await open(path, 'w');
  try {
    onProgress?.({ file: name, loaded, total: size, done: false });
    for await (const chunk of chunks) {
      if (chunk instanceof DownloadRestart) {
        [size, loaded] = [chunk.total, 0];
        checkSize(size ?? 0);
        await file.truncate(0);
      } else {
        checkSize(loaded + chunk.byteLength);
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
