// The servers the cross-browser flows use, as the end-to-end suites serve them: public/ by tools/dev/serve.mjs (the
// site, cross-origin isolated and under its policy; also where the widget's assets come from), and the widget's
// host pages (tests/e2e/hosts/) on another origin, cross-origin isolated or not.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CSP_REPORTS_PATH, startServer } from '../../tools/dev/serve.mjs';

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url));
const HOSTS_FOLDER = new URL('../e2e/hosts/', import.meta.url);
const HOST_HEADERS = {
  isolated: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
  plain: {},
};

// -> { site: { origin, requests: ['GET /path', …], cspReports() }, hosts: { isolated, plain } (origins), close() }.
// The site is on 127.0.0.1, the hosts on localhost: other origins.
export async function startServers() {
  const servers = [];
  try {
    const site = await startServer({ port: 0, root: PUBLIC });
    servers.push(site);
    const requests = [];
    site.on('request', (request) => requests.push(`${request.method} ${new URL(request.url, 'http://site').pathname}`));
    const origin = `http://127.0.0.1:${site.address().port}`;
    const hosts = {};
    for (const [isolation, headers] of Object.entries(HOST_HEADERS)) {
      const host = await startHostServer(origin, headers);
      servers.push(host);
      hosts[isolation] = `http://localhost:${host.address().port}`;
    }
    return {
      site: { origin, requests, cspReports: async () => (await fetch(`${origin}${CSP_REPORTS_PATH}`)).json() },
      hosts,
      close: () => Promise.all(servers.map(closeServer)),
    };
  } catch (error) {
    await Promise.all(servers.map(closeServer));
    throw error;
  }
}

// The host pages, with {{ASSETS}} replaced by the site's origin and {{INTEGRITY}} by the build's integrity value
// of the widget script.
async function startHostServer(assetsOrigin, headers) {
  const integrity = (await readFile(`${PUBLIC}gpt2-widget.integrity.txt`, 'utf8')).trim();
  const server = createServer(async (request, response) => {
    const name = new URL(request.url, 'http://host').pathname.slice(1);
    const html = /^[\w-]+\.html$/.test(name) ? await readFile(new URL(name, HOSTS_FOLDER), 'utf8').catch(() => null) : null;
    if (html === null) return response.writeHead(404).end();
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', ...headers });
    response.end(html.replaceAll('{{ASSETS}}', assetsOrigin).replaceAll('{{INTEGRITY}}', integrity));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

function closeServer(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}
