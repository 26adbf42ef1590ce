#!/usr/bin/env node
// Static server for public/ (the site root), used by `npm start`, the Playwright suites and the benchmark.
//
// Headers, and why:
// - COOP/COEP: the page is cross-origin isolated, so the engine can use threads (SharedArrayBuffer);
//   --no-isolation leaves them out (the page then runs on one thread: for testing that fallback).
// - CORS (Access-Control-Allow-Origin: *) and CORP (cross-origin): the widget and its assets are
//   loaded by other origins, including cross-origin-isolated ones.
// - application/wasm: needed by WebAssembly.instantiateStreaming.
// - Content-Security-Policy: the site's policy (CONTENT_SECURITY_POLICY), the one its pages also carry in a
//   <meta http-equiv> for static hosts that set no headers; sent with every file, so that the workers, which
//   take their policy from their own response, run under it too. The header adds a report-uri (which a <meta>
//   policy cannot have): the browser posts each violation, in the page or in its workers, to
//   CSP_REPORTS_PATH, where the server prints it and keeps it; a GET there lists them (the e2e suites fail on
//   any: tests/e2e/test.js).
// usage: node tools/dev/serve.mjs [--port N] [--root DIR] [--host H] [--no-isolation]    (PORT env also sets the port)
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',  // the threaded engine's glue and pthread worker (public/wasm/gpt2-mt.*)
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.safetensors': 'application/octet-stream',
};

// What the site's pages may load and run. Scripts only from the site itself, and WebAssembly
// ('wasm-unsafe-eval' allows compiling it, not eval); no inline script or style, so injected markup can run
// nothing. Workers from the site, and from blob: URLs, which is how the engine's workers start (a Blob URL is
// same-origin with the page even when the scripts come from elsewhere). Models are data and may come from
// anywhere (the Hub, its CDN, any host the user names). No plugins, no <base>, no form posts.
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "worker-src 'self' blob:",
  'connect-src *',
  "style-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

export const CSP_REPORTS_PATH = '/__csp-reports';
const MAX_CSP_REPORTS = 1000;
const MAX_CSP_REPORT_BYTES = 64 << 10;

const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};
const SHARING_HEADERS = {
  'Cross-Origin-Resource-Policy': 'cross-origin',
  'Access-Control-Allow-Origin': '*',
  'X-Content-Type-Options': 'nosniff',
};

function parseArgs(argv) {
  const options = { port: Number(process.env.PORT || 8080), root: 'public', host: '127.0.0.1', isolation: true };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--no-isolation') {
      options.isolation = false;
      continue;
    }
    if (flag === '--port') options.port = Number(value);
    else if (flag === '--root') options.root = value;
    else if (flag === '--host') options.host = value;
    else throw new Error(`unknown option ${flag} (use --port N, --root DIR, --host H, --no-isolation)`);
    i++;
  }
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
    throw new Error(`invalid port: ${options.port}`);
  }
  return options;
}

// Maps a URL path to a file under root, refusing anything that escapes it.
function resolveFile(root, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0')) return null;
  const file = normalize(join(root, decoded));
  return file === root || file.startsWith(root + sep) ? file : null;
}

// contentSecurityPolicy: the policy header sent with every file (null: none, for pages that are not the site's).
export function startServer({
  port = 8080, root = 'public', host = '127.0.0.1', isolation = true, contentSecurityPolicy = CONTENT_SECURITY_POLICY,
} = {}) {
  const rootDir = resolve(root);
  const cspReports = [];
  const server = createServer(async (request, response) => {
    const headers = {
      ...(isolation ? ISOLATION_HEADERS : {}),
      ...SHARING_HEADERS,
      ...(contentSecurityPolicy && { 'Content-Security-Policy': `${contentSecurityPolicy}; report-uri ${CSP_REPORTS_PATH}` }),
      'Cache-Control': 'no-cache',
    };
    if (contentSecurityPolicy && request.url === CSP_REPORTS_PATH) {
      if (request.method === 'POST') receiveCspReport(request, response, cspReports);
      else response.writeHead(200, { ...headers, 'Content-Type': 'application/json' }).end(JSON.stringify(cspReports));
      return;
    }
    if (request.method === 'OPTIONS') {
      response.writeHead(204, { ...headers, 'Access-Control-Allow-Methods': 'GET, HEAD', 'Access-Control-Allow-Headers': '*' });
      response.end();
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, headers).end('method not allowed\n');
      return;
    }
    const url = new URL(request.url, 'http://localhost');
    let file = resolveFile(rootDir, url.pathname);
    let info = file && (await stat(file).catch(() => null));
    if (info?.isDirectory()) {
      file = join(file, 'index.html');
      info = await stat(file).catch(() => null);
    }
    if (!info?.isFile()) {
      response.writeHead(404, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    response.writeHead(200, {
      ...headers,
      'Content-Type': MIME_TYPES[extname(file).toLowerCase()] || 'application/octet-stream',
      'Content-Length': info.size,
    });
    if (request.method === 'HEAD') {
      response.end();
      return;
    }
    createReadStream(file).on('error', () => response.destroy()).pipe(response);
  });
  return new Promise((resolveListening, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolveListening(server));
  });
}

// A browser's violation report ({ "csp-report": { "document-uri", "effective-directive", "blocked-uri", … } }):
// printed as one line and kept in reports (the newest MAX_CSP_REPORTS).
function receiveCspReport(request, response, reports) {
  let body = '';
  request.setEncoding('utf8');
  request.on('data', (chunk) => {
    body += chunk;
    if (body.length > MAX_CSP_REPORT_BYTES) request.destroy();
  });
  request.on('end', () => {
    let report;
    try {
      report = JSON.parse(body)['csp-report'];
    } catch {
      report = undefined;
    }
    if (report && typeof report === 'object') {
      reports.push(report);
      if (reports.length > MAX_CSP_REPORTS) reports.shift();
      console.error(`serve: Content-Security-Policy violation: ${report['effective-directive']} blocked ` +
        `${report['blocked-uri'] || '(inline)'} in ${report['document-uri']}`);
    }
    response.writeHead(204).end();
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const options = parseArgs(process.argv.slice(2));
    const server = await startServer(options);
    const { port } = server.address();
    console.log(`gpt2-wasm is served at http://localhost:${port}/ (root: ${resolve(options.root)}; Ctrl+C stops)`);
  } catch (error) {
    console.error(`serve: ${error.message}`);
    process.exit(1);
  }
}
