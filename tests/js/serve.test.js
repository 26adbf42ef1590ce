// Tests of tools/dev/serve.mjs, the static server of `npm start`, the e2e suites and the benchmark: it serves only
// the files under its root, with the site's headers on every answer (the Content-Security-Policy among them),
// and collects the browser's policy violation reports.
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CONTENT_SECURITY_POLICY, CSP_REPORTS_PATH, startServer } from '../../tools/dev/serve.mjs';

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url));
let server;
let port;

beforeAll(async () => {
  server = await startServer({ port: 0, root: PUBLIC });
  port = server.address().port;
});

afterAll(() => new Promise((resolve) => server.close(resolve)));

// One request with the path sent exactly as written (fetch and URL would resolve its dot segments first).
function send(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a path that tries to leave the root is not found, however it is spelled', async () => {
  for (const path of ['/../package.json', '/js/../../package.json', '/%2e%2e/package.json', '/..%2fpackage.json',
    '/..%5cpackage.json', '/%2e%2e%2f%2e%2e%2fetc%2fpasswd', '/index.html%00.png', '/%E0%A4%A']) {
    expect([path, (await send('GET', path)).status]).toEqual([path, 404]);
  }
  expect((await send('GET', '/index.html')).status).toBe(200);
});

test('every answer carries the site\'s policy with the report address, as the pages\' <meta> does', async () => {
  const expected = `${CONTENT_SECURITY_POLICY}; report-uri ${CSP_REPORTS_PATH}`;
  for (const path of ['/', '/embed.html', '/style.css', '/nothing-here']) {
    expect((await send('GET', path)).headers['content-security-policy']).toBe(expected);
  }
  for (const page of ['index.html', 'embed.html']) {
    const meta = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(readFileSync(`${PUBLIC}${page}`, 'utf8'));
    expect([page, meta?.[1]]).toEqual([page, CONTENT_SECURITY_POLICY]);
  }
});

test('violation reports are kept and listed; a body that is not a report, or too large, is not kept', async () => {
  const before = JSON.parse((await send('GET', CSP_REPORTS_PATH)).body).length;
  const report = { 'document-uri': 'http://x/', 'effective-directive': 'script-src-elem', 'blocked-uri': 'inline' };
  expect((await send('POST', CSP_REPORTS_PATH, JSON.stringify({ 'csp-report': report }))).status).toBe(204);
  expect((await send('POST', CSP_REPORTS_PATH, 'not json')).status).toBe(204);
  await send('POST', CSP_REPORTS_PATH, JSON.stringify({ 'csp-report': { pad: 'x'.repeat(100_000) } })).catch(() => null);
  const listed = JSON.parse((await send('GET', CSP_REPORTS_PATH)).body);
  expect(listed.slice(before)).toEqual([report]);
});

test('only GET and HEAD read files', async () => {
  expect((await send('PUT', '/index.html', 'x')).status).toBe(405);
  expect((await send('DELETE', '/index.html')).status).toBe(405);
  const head = await send('HEAD', '/index.html');
  expect([head.status, head.body]).toEqual([200, '']);
});
