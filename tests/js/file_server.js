// The HTTP server of the Jest tests that load models over the network (loader.test.js, faults.test.js,
// gguf.test.js, downloads.test.js): it serves GET /ROUTE/…/NAME, the file NAME of `files` answered by the
// handler of ROUTE, so a test picks how each file misbehaves by the URL it loads from (folders between, as in
// the Hub's /REPO/resolve/main/NAME, are allowed). Unknown routes and files are 404s.
import { createServer } from 'node:http';

// routes: route -> (res, body, name, req) that answers; read at each request, so a test may change them.
// -> { baseUrl, requestCount(), requests() ([{ path, range }], range: the Range header or null), close() }
export async function startFileServer(files, routes) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push({ path: req.url, range: req.headers.range ?? null });
    const segments = req.url.split('/');
    const [route, name] = [segments[1], segments.at(-1)];
    const body = files[name];
    if (!routes[route] || !body) return status(res, 404, 'Not Found');
    return routes[route](res, body, name, req);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}`,
    requestCount: () => requests.length,
    requests: () => [...requests],
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export function send(res, body, headers) {
  res.writeHead(200, headers);
  res.end(body);
}

export function status(res, code, text) {
  res.writeHead(code, text, { 'Content-Type': 'text/plain' });
  res.end(text);
}

// Announces the whole body, sends 90% of it, then drops the connection.
export function sendCut(res, body) {
  res.writeHead(200, { 'Content-Length': body.length });
  res.write(body.subarray(0, Math.floor(body.length * 0.9)), () => setTimeout(() => res.socket.destroy(), 20));
}

// The whole body at 4 KiB per 10 ms, with its length announced: a download slow enough to abort or switch during.
// The response is ended after its last byte, so that the connection can serve the client's next request.
export function sendSlow(res, body) {
  res.writeHead(200, { 'Content-Length': body.length });
  let offset = 0;
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer);
    res.write(body.subarray(offset, (offset += 4096)));
    if (offset < body.length) return undefined;
    clearInterval(timer);
    return res.end();
  }, 10);
  res.on('close', () => clearInterval(timer));
}

// As a server that supports ranges (as the Hub does): `Range: bytes=N-` gets 206 and the bytes from N, with
// their Content-Range; other requests, or all with honourRange false, the whole file. cutAt (a byte of the
// file): the connection is dropped there instead of finishing (at once if the answer starts at or past it).
export function sendRange(req, res, body, { honourRange = true, cutAt = null, headers = {} } = {}) {
  const range = honourRange ? /^bytes=(\d+)-$/.exec(req.headers.range ?? '') : null;
  const start = range ? Number(range[1]) : 0;
  const partHeaders = range ? { 'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}` } : {};
  res.writeHead(range ? 206 : 200, { 'Content-Length': body.length - start, 'Accept-Ranges': 'bytes', ...partHeaders, ...headers });
  if (cutAt === null || cutAt >= body.length) return res.end(body.subarray(start));
  const drop = () => setTimeout(() => res.socket.destroy(), 20);
  if (cutAt > start) return res.write(body.subarray(start, cutAt), drop);
  res.flushHeaders();
  return drop();
}
