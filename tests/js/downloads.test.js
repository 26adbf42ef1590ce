// Downloads that survive and cached copies that are checked (web/lib/loading/download.js, web/lib/loading/model_cache.js,
// web/lib/loading/crc32.js, through web/lib/loading/loader.js in Node): a local server on 127.0.0.1 drops connections mid-file, honours
// or ignores Range, changes the file between requests or stops answering; an in-memory stand-in for the
// browser's Cache API holds copies that the tests damage. Uses the tiny-random fixture (token ids only).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { crc32, gzipSync } from 'node:zlib';
import { jest } from '@jest/globals';
import { Crc32 } from '../../web/lib/loading/crc32.js';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { useFakeCaches } from './fake_caches.js';
import { sendRange, sendSlow, startFileServer } from './file_server.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const files = {
  'config.json': readFileSync(`${TINY}config.json`),
  'model.safetensors': readFileSync(`${TINY}model.safetensors`),
};
const greedy = JSON.parse(readFileSync(`${TINY}greedy.json`, 'utf8'));
const WEIGHTS = files['model.safetensors'];
const HALF = Math.floor(WEIGHTS.length / 2);

// How model.safetensors is served, by kind (config.json is always served whole); each answer gets the number
// of the request for the file on its route (1 for the first).
const WEIGHT_ANSWERS = {
  ok: (req, res, body) => sendRange(req, res, body),
  // Drops the first connection at 50%, then honours Range.
  resume: (req, res, body, n) => sendRange(req, res, body, { cutAt: n === 1 ? HALF : null, headers: { ETag: '"v1"' } }),
  // Drops the first connection at 50%, then answers every request with the whole file.
  norange: (req, res, body, n) => sendRange(req, res, body, { honourRange: false, cutAt: n === 1 ? HALF : null }),
  // The file changes after the first connection dropped: the resumed part would be of another file.
  changed: (req, res, body, n) => sendRange(req, res, body, { cutAt: n === 1 ? HALF : null, headers: { ETag: n === 1 ? '"v1"' : '"v2"' } }),
  // Drops every connection at 50%, ignoring Range.
  alwayscut: (req, res, body) => sendRange(req, res, body, { honourRange: false, cutAt: HALF }),
  // Drops the first connection at 50%; after that, connections are closed before any answer.
  unreachable: (req, res, body, n) => (n === 1 ? sendRange(req, res, body, { cutAt: HALF }) : req.socket.destroy()),
  slow: (req, res, body) => sendSlow(res, body),
  // Drops the first connection at 50%, then answers Range with a 206 whose Content-Range starts at byte 0.
  wrongrange: (req, res, body, n) => (n === 1 || !req.headers.range ? sendRange(req, res, body, { cutAt: n === 1 ? HALF : null })
    : sendPart(res, body, 0, `bytes 0-${body.length - 1}/${body.length}`)),
  // Drops the first connection at 50%, then answers Range with the rest of a file 10 bytes longer.
  othersize: (req, res, body, n) => (n === 1 || !req.headers.range ? sendRange(req, res, body, { cutAt: n === 1 ? HALF : null })
    : sendPart(res, body, HALF, `bytes ${HALF}-${body.length - 1}/${body.length + 10}`)),
  // gzip-encoded (Content-Length counts the compressed bytes), the first connection dropped at half of them.
  gzip: (req, res, body, n) => {
    const encoded = gzipSync(body);
    res.writeHead(200, { 'Content-Encoding': 'gzip', 'Content-Length': encoded.length, 'Accept-Ranges': 'bytes' });
    if (n > 1) return res.end(encoded);
    return res.write(encoded.subarray(0, encoded.length >> 1), () => setTimeout(() => res.socket.destroy(), 20));
  },
  // A Content-Length that is not a number, written on the socket (Node's server would not send it).
  badlength: (req, res) => res.socket.end('HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\nConnection: close\r\n\r\n12abc'),
  // Redirects: to the ok route's file, to a file: URL, and to itself.
  redirect: (req, res) => res.writeHead(302, { Location: req.url.replace(/^\/redirect\d+\//, `/${okRoute}/`) }).end(),
  redirectfile: (req, res) => res.writeHead(302, { Location: 'file:///etc/passwd' }).end(),
  redirectloop: (req, res) => res.writeHead(302, { Location: req.url }).end(),
  // Announces 150 MB and sends garbage: the engine refuses it from the first bytes.
  large: (req, res) => {
    res.writeHead(200, { 'Content-Length': 150e6 });
    res.write(Buffer.alloc(4096, 0x5a), () => setTimeout(() => res.socket.destroy(), 20));
  },
};

// A 206 answer: the file's bytes from start, said to be contentRange.
function sendPart(res, body, start, contentRange) {
  res.writeHead(206, { 'Content-Length': body.length - start, 'Content-Range': contentRange });
  res.end(body.subarray(start));
}

const routes = {};
let routeCount = 0;
let okRoute;
let server;
let engine;
let cleanIds;

// A route of its own for a test, serving model.safetensors as `kind` says: its requests are numbered from 1,
// and its URLs are in no cache.
function newRoute(kind) {
  const route = `${kind}${++routeCount}`;
  let weightRequests = 0;
  routes[route] = (res, body, name, req) => (name === 'model.safetensors'
    ? WEIGHT_ANSWERS[kind](req, res, body, ++weightRequests) : sendRange(req, res, body));
  return route;
}

beforeAll(async () => {
  engine = await loadEngine();
  server = await startFileServer(files, routes);
  okRoute = newRoute('ok');
  const { model } = await loadModelIntoEngine(engine, modelSource(`${server.baseUrl}/${okRoute}/`), { withTokenizer: false });
  cleanIds = greedyIds(model);
  model.dispose();
});

afterAll(() => server.close());

function greedyIds(model) {
  const session = model.createSession();
  try {
    session.setSampling({ temperature: 0 });
    const ids = [session.prefill(greedy.prompt)];
    while (ids.length < 12) ids.push(session.step(ids.at(-1)));
    return ids;
  } finally {
    session.dispose();
  }
}

// Loads the route's model (token ids only) and checks it generates what the model of a clean download does.
async function expectCleanModel(route, options = {}) {
  const { model } = await loadModelIntoEngine(engine, modelSource(`${server.baseUrl}/${route}/`), { withTokenizer: false, ...options });
  try {
    expect(greedyIds(model)).toEqual(cleanIds);
  } finally {
    model.dispose();
  }
}

// -> the rejection of loading the route's model, checking that nothing of it stayed in the wasm heap.
async function loadError(route, options = {}) {
  const before = engine.heapUsedBytes();
  const error = await loadModelIntoEngine(engine, modelSource(`${server.baseUrl}/${route}/`), { withTokenizer: false, ...options })
    .then(() => null, (e) => e);
  expect(error).not.toBeNull();
  expect(engine.heapUsedBytes()).toBe(before);
  return error;
}

// The Range headers of the requests for a file of route, in order (null: none).
function weightRanges(route, name = 'model.safetensors') {
  return server.requests().filter(({ path }) => path === `/${route}/${name}`).map(({ range }) => range);
}

afterEach(() => {
  delete globalThis.caches;
});

describe('a download that loses its connection', () => {
  test('resumes with a Range request from the byte where it stopped, and the model is the clean one', async () => {
    const route = newRoute('resume');
    const events = [];
    await expectCleanModel(route, { onProgress: (event) => events.push(event) });
    expect(weightRanges(route)).toEqual([null, `bytes=${HALF}-`]);
    const weights = events.filter((event) => event.file === 'model.safetensors');
    expect(weights.filter((event) => event.retry)).toEqual([expect.objectContaining({ loaded: HALF, retry: { attempt: 2, delayMs: 0 } })]);
    for (let i = 1; i < weights.length; i++) expect(weights[i].loaded).toBeGreaterThanOrEqual(weights[i - 1].loaded);
    expect(weights.at(-1)).toMatchObject({ loaded: WEIGHTS.length, fraction: 1 });
  });

  test('starts the file over when the server ignores Range and sends it whole, and the model is the clean one', async () => {
    const route = newRoute('norange');
    const events = [];
    await expectCleanModel(route, { onProgress: (event) => events.push(event) });
    expect(weightRanges(route)).toEqual([null, `bytes=${HALF}-`]);
    const weights = events.filter((event) => event.file === 'model.safetensors');
    const retry = weights.findIndex((event) => event.retry);
    expect(weights[retry + 1]).toMatchObject({ loaded: 0, total: WEIGHTS.length, fraction: 0 });  // back to the start
    expect(weights.at(-1)).toMatchObject({ loaded: WEIGHTS.length, fraction: 1 });
  });

  test('does not splice in the rest of a file that changed (another ETag): it starts over with the whole new file', async () => {
    const route = newRoute('changed');
    await expectCleanModel(route);
    expect(weightRanges(route)).toEqual([null, `bytes=${HALF}-`, null]);
  });

  test('gives up after 6 attempts when every connection drops, with a network error; nothing is cached or left in the heap', async () => {
    const route = newRoute('alwayscut');
    const stored = useFakeCaches();
    const error = await loadError(route);
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'network' });
    expect(error.message).toMatch(
      new RegExp(`^model\\.safetensors: network error: the download stopped at ${HALF} of ${WEIGHTS.length} bytes after 6 attempts \\(`));
    expect(weightRanges(route)).toHaveLength(6);
    expect([...stored.keys()].filter((url) => url.includes(`/${route}/`))).toEqual([]);
  });

  test('waits before an attempt that follows one that got nothing: 1, 2, 4, then 8 times retryDelayMs, then gives up', async () => {
    const retries = [];
    const error = await loadError(newRoute('unreachable'), { retryDelayMs: 5, onProgress: (event) => event.retry && retries.push(event.retry) });
    expect(retries).toEqual([
      { attempt: 2, delayMs: 0 },  // the first connection delivered half the file: at once
      { attempt: 3, delayMs: 5 },
      { attempt: 4, delayMs: 10 },
      { attempt: 5, delayMs: 20 },
      { attempt: 6, delayMs: 40 },
    ]);
    expect(error.message).toMatch(
      new RegExp(`^model\\.safetensors: network error: the download stopped at ${HALF} of ${WEIGHTS.length} bytes after 6 attempts \\(network error fetching`));
  });

  test('stops waiting for a retry at once when aborted, with an AbortError', async () => {
    const controller = new AbortController();
    const onProgress = (event) => event.retry?.delayMs > 0 && controller.abort();
    // An hour's wait: only an abort that ends the wait at once lets the test finish in time.
    const error = await loadError(newRoute('unreachable'), { retryDelayMs: 3_600_000, signal: controller.signal, onProgress });
    expect(error.name).toBe('AbortError');
    expect(error.message).toBe('loading model.safetensors was aborted');
  });
});

describe('headers the downloader does not take on trust', () => {
  test.each([{ kind: 'wrongrange', range: 'starts elsewhere than asked' }, { kind: 'othersize', range: 'is of a file of another size' }])(
    'a 206 whose Content-Range $range is not spliced in: the file starts over, whole', async ({ kind }) => {
      const route = newRoute(kind);
      await expectCleanModel(route);
      expect(weightRanges(route)).toEqual([null, `bytes=${HALF}-`, null]);
    });

  test('with a Content-Encoding the size is unknown and a broken download is not resumed by offset: it starts over', async () => {
    const route = newRoute('gzip');
    const totals = [];
    await expectCleanModel(route, { onProgress: (event) => event.file === 'model.safetensors' && totals.push(event.total) });
    expect(weightRanges(route)).toEqual([null, null]);
    expect(new Set(totals.slice(0, -1))).toEqual(new Set([null]));  // the last event gives the size reached
  });

  test('a Content-Length that is not a number is a network error naming the file', async () => {
    const error = await loadError(newRoute('badlength'));
    expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'network' });
    expect(error.message).toMatch(/^model\.safetensors: network error/);
  });

  test('a redirect is followed to the file at its end', async () => {
    const route = newRoute('redirect');
    await expectCleanModel(route);
    expect(server.requests().filter(({ path }) => path.endsWith('/model.safetensors')).map(({ path }) => path).slice(-2))
      .toEqual([`/${route}/model.safetensors`, `/${okRoute}/model.safetensors`]);
  });

  test('a redirect to a file: URL, or one that never ends, is a network error naming the file', async () => {
    for (const kind of ['redirectfile', 'redirectloop']) {
      const error = await loadError(newRoute(kind));
      expect(error).toMatchObject({ name: 'ModelLoadError', file: 'model.safetensors', kind: 'network' });
    }
  });
});

describe('progress', () => {
  test('events carry the speed and the time left, null until measured; their product is the bytes left', async () => {
    const events = [];
    await expectCleanModel(newRoute('slow'), { onProgress: (event) => events.push(event) });
    const weights = events.filter((event) => event.file === 'model.safetensors');
    expect(weights[0]).toMatchObject({ loaded: 0, bytesPerSecond: null, secondsLeft: null });
    const measured = weights.filter((event) => event.bytesPerSecond !== null && event.loaded < WEIGHTS.length);
    expect(measured.length).toBeGreaterThan(0);
    for (const { loaded, bytesPerSecond, secondsLeft } of measured) {
      expect(bytesPerSecond).toBeGreaterThan(0);
      expect(secondsLeft * bytesPerSecond).toBeCloseTo(WEIGHTS.length - loaded, 3);
    }
  });
});

describe('the Cache API copy', () => {
  const url = (route, name) => `${server.baseUrl}/${route}/${name}`;

  test('CRC-32 computed piece by piece is node:zlib\'s', () => {
    for (const size of [0, 1, 7, 8, 9, 100, 65537]) {
      const bytes = randomBytes(size);
      const crc = new Crc32();
      for (let offset = 0; offset < size; offset += 1 + (offset % 13)) crc.update(bytes.subarray(offset, offset + 1 + (offset % 13)));
      expect(crc.digest()).toBe(crc32(bytes));
    }
  });

  test('a cached file is stored with its length and CRC-32, and the next load makes no request', async () => {
    const route = newRoute('ok');
    const stored = useFakeCaches();
    await expectCleanModel(route);
    const weightsUrl = url(route, 'model.safetensors');
    const digestUrl = [...stored.keys()].find((key) => key !== weightsUrl && key.startsWith(weightsUrl));
    expect(JSON.parse(new TextDecoder().decode(stored.get(digestUrl).body))).toEqual({ length: WEIGHTS.length, crc32: crc32(WEIGHTS) });
    const requests = server.requestCount();
    await expectCleanModel(route);
    expect(server.requestCount()).toBe(requests);
  });

  test.each([
    ['truncated', (bytes) => bytes.subarray(0, bytes.length - 1000)],
    ['with one byte changed', (bytes) => {
      const changed = bytes.slice();
      changed[Math.floor(changed.length * 0.75)] ^= 0x01;  // in a tensor: the engine could not tell
      return changed;
    }],
  ])('a cached file %s is found out, evicted and downloaded again, alone; the model is the clean one, and the next load uses the new copy', async (_, damage) => {
    const route = newRoute('ok');
    const stored = useFakeCaches();
    await expectCleanModel(route);
    const weightsUrl = url(route, 'model.safetensors');
    stored.get(weightsUrl).body = damage(stored.get(weightsUrl).body);
    await expectCleanModel(route);
    expect(weightRanges(route)).toHaveLength(2);
    expect(weightRanges(route, 'config.json')).toHaveLength(1);  // its copy was whole
    expect(Buffer.from(stored.get(weightsUrl).body).equals(WEIGHTS)).toBe(true);
    await expectCleanModel(route);
    expect(weightRanges(route)).toHaveLength(2);
  });

  test('a cached file without its digest (stored by an older version) is evicted and downloaded again', async () => {
    const route = newRoute('ok');
    const stored = useFakeCaches();
    for (const name of Object.keys(files)) stored.set(url(route, name), { body: new Uint8Array(files[name]), headers: {} });
    const requests = server.requestCount();
    await expectCleanModel(route);
    expect(server.requestCount()).toBe(requests + 2);
    expect(stored.size).toBe(4);  // the two files and their digests
  });

  test('a full quota: the model loads, a last progress event says it was not kept, and one warning', async () => {
    const route = newRoute('ok');
    const stored = useFakeCaches({ refusePut: (key) => key.startsWith(url(route, 'model.safetensors')) });
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const events = [];
      await expectCleanModel(route, { onProgress: (event) => events.push(event) });
      expect(events.filter((event) => event.notCached)).toEqual([expect.objectContaining({ notCached: 'The quota has been exceeded.' })]);
      expect(events.at(-1).notCached).toBe('The quota has been exceeded.');
      expect(warn).toHaveBeenCalledTimes(1);
      expect([...stored.keys()].some((key) => key.startsWith(url(route, 'model.safetensors')))).toBe(false);
    } finally {
      warn.mockRestore();
    }
  });

  test('a digest that cannot be stored takes its file out of the cache too', async () => {
    const route = newRoute('ok');
    const stored = useFakeCaches({ refusePut: (key) => key.startsWith(url(route, 'model.safetensors?')) });
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const events = [];
      await expectCleanModel(route, { onProgress: (event) => events.push(event) });
      expect(events.at(-1).notCached).toBe('The quota has been exceeded.');
      expect([...stored.keys()].some((key) => key.startsWith(url(route, 'model.safetensors')))).toBe(false);
    } finally {
      warn.mockRestore();
    }
  });

  test('a file of 100 MB or more to be cached asks once for persistent storage; a small one does not', async () => {
    useFakeCaches();
    const persist = jest.fn(async () => true);
    Object.defineProperty(globalThis, 'navigator', { value: { storage: { persist } }, configurable: true, writable: true });
    try {
      await expectCleanModel(newRoute('ok'));
      expect(persist).not.toHaveBeenCalled();
      expect((await loadError(newRoute('large'))).message).toMatch(/^model\.safetensors: /);
      expect((await loadError(newRoute('large'))).message).toMatch(/^model\.safetensors: /);
      expect(persist).toHaveBeenCalledTimes(1);
    } finally {
      delete globalThis.navigator;
    }
  });
});
