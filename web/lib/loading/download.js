// Downloads of model files over HTTP that survive dropped connections. When the body breaks off mid-file, the
// download asks for the rest with `Range: bytes=N-` and goes on from byte N, so whoever reads its chunks sees
// one unbroken file. A server that answers with the whole file instead (it ignores Range, or the file changed)
// starts the file over: the chunks then carry a DownloadRestart before its first byte again.
//
// Retries are bounded: the download gives up after STALLED_ATTEMPTS failed attempts in a row that brought the
// file no further than it had been (a failure that did resets the count). After a connection that delivered
// bytes before it broke, the retry is made at once (the server answers; the path to it broke); after an
// attempt that got nothing, it waits 1 s, 2 s, 4 s, then 8 s (doubling from retryDelayMs). The first request
// is not retried: a server that cannot be reached, or that CORS blocks, fails at once with what fetch said.
import { ModelLoadError, throwIfAborted } from '../errors.js';
import { describe } from './load_errors.js';

const STALLED_ATTEMPTS = 5;
const FIRST_RETRY_DELAY_MS = 1000;

// In a download's chunks: the bytes so far are void; the file starts again from byte 0, `total` bytes long
// (null: unknown).
export class DownloadRestart {
  constructor(total) {
    this.total = total;
  }
}

// -> the body of the file at url, { total (bytes or null), chunks: AsyncIterable<Uint8Array | DownloadRestart>,
// cancel() }, once the server has answered. onRetry({ attempt, delayMs }) hears of each retry before its wait;
// signal aborts the download, a wait included, at once.
export async function startDownload(name, url, { signal, onRetry, retryDelayMs = FIRST_RETRY_DELAY_MS } = {}) {
  const download = new Download(name, url, { signal, onRetry, retryDelayMs });
  download.accept(await fetchFile(name, url, signal));
  return { total: download.total, chunks: download.chunks(), cancel: () => download.cancel() };
}

class Download {
  total = null;   // the file's bytes, when the server says
  #name;
  #url;
  #signal;
  #onRetry;
  #retryDelayMs;
  #reader = null;
  #offset = 0;        // bytes of the file delivered so far
  #received = 0;      // bytes delivered by all attempts, restarts included
  #version = null;    // the first response's ETag or Last-Modified: a resumed part must be of the same file
  #resumable = false; // whether the bytes so far can be continued by byte offset (not with a Content-Encoding)

  constructor(name, url, { signal, onRetry, retryDelayMs }) {
    this.#name = name;
    this.#url = url;
    this.#signal = signal;
    this.#onRetry = onRetry;
    this.#retryDelayMs = retryDelayMs;
  }

  // The whole file from a 200 response: the download (re)starts at byte 0.
  accept(response) {
    if (!response.body) throw new ModelLoadError(this.#name, 'network', `no response body from ${this.#url}`);
    this.#reader = response.body.getReader();
    this.#offset = 0;
    this.total = lengthOf(response);
    this.#version = versionOf(response);
    this.#resumable = !isEncoded(response);
  }

  async* chunks() {
    let furthest = 0;  // the furthest byte delivered
    let stalled = 0;   // failed attempts in a row that did not get past it
    for (let attempt = 1; ; attempt++) {
      const receivedBefore = this.#received;
      try {
        if (attempt > 1 && await this.#reconnect()) yield new DownloadRestart(this.total);
        yield* this.#body();
        return;
      } catch (error) {
        throwIfAborted(this.#signal, this.#name);
        stalled = this.#offset > furthest ? 0 : stalled + 1;
        furthest = Math.max(furthest, this.#offset);
        if (stalled === STALLED_ATTEMPTS) throw this.#failure(error, attempt);
        const delayMs = this.#received > receivedBefore ? 0 : this.#retryDelayMs * 2 ** (stalled - 1);
        this.#onRetry?.({ attempt: attempt + 1, delayMs });
        await wait(delayMs, this.#signal);
        throwIfAborted(this.#signal, this.#name);
      }
    }
  }

  cancel() {
    this.#reader?.cancel().catch(() => {});
  }

  async* #body() {
    for (;;) {
      const { done, value } = await this.#reader.read();
      if (done) break;
      this.#offset += value.byteLength;
      this.#received += value.byteLength;
      yield value;
    }
    // Browsers report a body shorter than its Content-Length as an error; in case one ends it quietly:
    if (this.total !== null && this.#offset < this.total) throw new Error('the connection closed early');
  }

  // A new request after a failure: for the rest of the file if it can be resumed, else for the whole file.
  // -> whether the file starts over. Not If-Range, which is not a CORS-safelisted header: cross-origin (the
  // Hub) it would cost a preflight that a server may refuse; the resumed part's version is compared instead.
  async #reconnect() {
    this.cancel();
    const resuming = this.#resumable && this.#offset > 0;
    let response = await fetchFile(this.#name, this.#url, this.#signal, resuming ? { Range: `bytes=${this.#offset}-` } : {});
    if (response.status === 206 && response.body && this.#continues(response)) {
      this.#reader = response.body.getReader();
      return false;
    }
    if (response.status === 206) {  // a part, but not the rest of this file: the whole file instead
      response.body?.cancel().catch(() => {});
      response = await fetchFile(this.#name, this.#url, this.#signal);
    }
    this.accept(response);
    return true;
  }

  // Whether a 206 answer to `Range: bytes=OFFSET-` is the rest of this very file: of the same version (when
  // both responses say), from OFFSET to the file's end. Cross-origin, Content-Range and ETag can only be read
  // if the server exposes them (the Hub does); without Content-Range, a Content-Length of exactly the bytes
  // left stands in for it.
  #continues(response) {
    const version = versionOf(response);
    if (this.#version !== null && version !== null && version !== this.#version) return false;
    if (isEncoded(response)) return false;
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(response.headers.get('content-range') ?? '');
    if (range) {
      const [start, end, size] = [Number(range[1]), Number(range[2]), range[3] === '*' ? null : Number(range[3])];
      return start === this.#offset && (this.total === null || (end === this.total - 1 && (size === null || size === this.total)));
    }
    return this.total !== null && lengthOf(response) === this.total - this.#offset;
  }

  #failure(error, attempts) {
    const reason = error instanceof ModelLoadError ? error.message.slice(this.#name.length + 2) : describe(error);
    return new ModelLoadError(this.#name, 'network',
      `network error: the download stopped at ${this.#offset} of ${this.total ?? '?'} bytes after ${attempts} attempts (${reason})`,
      { cause: error });
  }
}

async function fetchFile(name, url, signal, headers = {}) {
  let response;
  try {
    // CORS mode (fetch's default, spelled out because it matters): under the page's COEP require-corp (threads,
    // see tools/dev/serve.mjs) a cross-origin response is only usable if CORS or CORP allows it, and Hugging Face
    // (and the CDN it redirects to) answers with Access-Control-Allow-Origin: *. Without credentials, so the
    // wildcard suffices. A no-cors fetch would give an opaque response that COEP blocks.
    response = await fetch(url, { signal, headers, mode: 'cors', credentials: 'same-origin' });
  } catch (error) {
    throwIfAborted(signal, name);
    throw new ModelLoadError(name, 'network',
      `network error fetching ${url} (offline, connection refused, or blocked by CORS): ${describe(error)}`, { cause: error });
  }
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    const hint = response.status === 401 || response.status === 403 ? ' (private or gated repository?)' : '';
    throw new ModelLoadError(name, 'http', `HTTP ${response.status} ${response.statusText} from ${url}${hint}`.trimEnd());
  }
  return response;
}

// With a Content-Encoding, Content-Length counts compressed bytes: the size is then unknown.
function lengthOf(response) {
  const length = response.headers.get('content-length');
  return !isEncoded(response) && length !== null && /^\d+$/.test(length) ? Number(length) : null;
}

function isEncoded(response) {
  return (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
}

function versionOf(response) {
  const etag = response.headers.get('etag');
  if (etag !== null) return `ETag ${etag}`;
  const modified = response.headers.get('last-modified');
  return modified === null ? null : `Last-Modified ${modified}`;
}

// Resolves after ms, or at once when signal aborts (the caller then throws the AbortError).
function wait(ms, signal) {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done);
  });
}
