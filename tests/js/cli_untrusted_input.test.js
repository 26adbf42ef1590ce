// Tests of what gpt2-wasm (web/cli/cli.js) does with input that comes from outside: model URLs and Hub ids that try
// to name a file outside the disk cache, environment variables, servers that redirect or send too much, and
// tokens whose text would drive a terminal. Everything is served by a local HTTP server, and the cache is a
// temporary folder three levels deep, so that a write outside it would be seen.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { cacheDirectory, cachedFileName, resolveModelSource } from '../../web/cli/cli_cache.js';
import { escapeControlCharacters } from '../../web/cli/cli_output.js';
import { runCli, runCliOnTerminal } from './cli_runner.js';
import { writeModelWithRenamedTokens } from './renamed_tokens.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GGUF = readFileSync(`${ROOT}public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf`);
const GENERATE = ['-n', '4', '--temperature', '0', 'ROMEO:'];

jest.setTimeout(60_000);

const run = (args, env = {}) => runCli(args, env)
  .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), ({ code, stdout, stderr }) => ({ code, stdout, stderr }));

// Answers every path with the GGUF file, except /redirect/…, sent to the crafted URL in ?to=, and
// /text/N/NAME, a text file of N bytes (/chunked-text/N/NAME: the same without a Content-Length).
async function startCraftedServer() {
  const requests = [];
  const server = createServer((request, response) => {
    requests.push(request.url);
    const url = new URL(request.url, 'http://server');
    if (url.pathname.startsWith('/redirect/')) return response.writeHead(302, { Location: url.searchParams.get('to') }).end();
    const text = /^\/(text|chunked-text)\/(\d+)\//.exec(url.pathname);
    if (text) {
      const body = Buffer.alloc(Number(text[2]), 'a');
      response.writeHead(200, text[1] === 'text' ? { 'Content-Length': body.length } : {});
      return response.end(body);
    }
    response.writeHead(200, { 'Content-Length': GGUF.length }).end(GGUF);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// Every file under folder, as paths relative to it.
const filesUnder = (folder) => readdirSync(folder, { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile()).map((entry) => relative(folder, join(entry.parentPath ?? entry.path, entry.name))).sort();

describe('the disk cache keeps to its folder', () => {
  let server;
  let outside;   // a temporary folder: the cache is outside/one/two/cache, which does not exist yet
  let env;

  beforeAll(async () => {
    server = await startCraftedServer();
  });
  afterAll(() => server.close());
  beforeEach(() => {
    outside = mkdtempSync(join(tmpdir(), 'gpt2-wasm-untrusted-'));
    env = { GPT2_WASM_CACHE_DIR: join(outside, 'one', 'two', 'cache'), HF_ENDPOINT: `${server.base}/hub` };
    server.requests.length = 0;
  });
  afterEach(() => rmSync(outside, { recursive: true, force: true }));

  const refusals = [
    ['a/..%2F..%2F..%2F..%2F..%2Fpwned.gguf', '"../../../../../pwned.gguf"', 'it holds a path separator'],
    ['a/..%5C..%5C..%5Cpwned.gguf', '"..\\\\..\\\\..\\\\pwned.gguf"', 'it holds a path separator'],
    ['a/%2e%2e%2f%2e%2e%2fpwned.gguf', '"../../pwned.gguf"', 'it holds a path separator'],
    ['a/%2Ftmp%2Fpwned.gguf', '"/tmp/pwned.gguf"', 'it holds a path separator'],
    ['a/C:%5Cpwned.gguf', '"C:\\\\pwned.gguf"', 'it holds a path separator'],
    ['a/pwned%00.gguf', '"pwned\\u0000.gguf"', 'it holds a control character'],
    ['a/pwned%1B%5B2J.gguf', '"pwned\\u001b[2J.gguf"', 'it holds a control character'],
    ['a/CON.gguf', '"CON.gguf"', 'Windows reserves it for a device'],
    ['a/pwned%3A.gguf', '"pwned:.gguf"', 'it holds a character that Windows does not allow in file names'],
  ];
  test.each(refusals)('the URL …/%s is refused with one line naming its file name, and nothing is written or fetched', async (path, shown, why) => {
    const url = `${server.base}/${path}`;
    const { code, stdout, stderr } = await run(['--model', url, ...GENERATE], env);
    expect({ code, stdout, stderr }).toEqual({
      code: 1, stdout: '', stderr: `gpt2-wasm: ${url}: the file name ${shown} cannot be kept in the cache (${why})\n`,
    });
    expect(server.requests).toEqual([]);
    expect(filesUnder(outside)).toEqual([]);
  });

  test('a 10,000-character file name is refused, the line naming it shortened', async () => {
    const name = `${'a'.repeat(10_000)}.gguf`;
    const { code, stderr } = await run(['--model', `${server.base}/${name}`, ...GENERATE], env);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^gpt2-wasm: http:\/\/127\.0\.0\.1:\d+\/a+… \(100\d\d characters\): the file name "a+… \(10007 characters\) cannot be kept in the cache \(it is over 200 bytes long\)\n$/);
    expect(filesUnder(outside)).toEqual([]);
  });

  test('a name that is not valid percent-encoding is refused', async () => {
    const url = `${server.base}/a/%E0%A4.gguf`;
    const { stderr } = await run(['--model', url, ...GENERATE], env);
    expect(stderr).toBe(`gpt2-wasm: ${url}: the file name %E0%A4.gguf is not valid percent-encoding\n`);
  });

  test('dot segments in the URL are the URL\'s own: …/%2e%2e/%2e%2e/x.gguf is /x.gguf, cached inside its entry', async () => {
    const { code, stdout } = await run(['--model', `${server.base}/a/b/%2e%2e/%2e%2e/pwned.gguf`, ...GENERATE], env);
    expect(code).toBe(0);
    expect(stdout.length).toBeGreaterThan(1);
    expect(server.requests).toEqual(['/pwned.gguf']);
    expect(filesUnder(outside)).toEqual([expect.stringMatching(/^one\/two\/cache\/models\/127\.0\.0\.1_\d+_pwned\.gguf-[0-9a-f]{12}\/pwned\.gguf$/)]);
  });

  test('a redirect to a crafted URL changes nothing: the file keeps the name of the URL given, inside its entry', async () => {
    const to = '/a/..%2F..%2F..%2F..%2Fpwned.gguf';
    const { code } = await run(['--model', `${server.base}/redirect/model.gguf?to=${encodeURIComponent(to)}`, ...GENERATE], env);
    expect(code).toBe(0);
    expect(server.requests).toEqual([`/redirect/model.gguf?to=${encodeURIComponent(to)}`, to]);
    expect(filesUnder(outside)).toEqual([expect.stringMatching(/^one\/two\/cache\/models\/[\w.-]+\/model\.gguf$/)]);
  });

  test('a Hub id\'s file is one file name: owner/name/..\\pwned.gguf is refused, and the typed name is what the Hub is asked for', async () => {
    const { code, stderr } = await run(['--model', 'owner/name/..\\pwned.gguf', ...GENERATE], env);
    expect(code).toBe(1);
    expect(stderr).toBe(`gpt2-wasm: ${server.base}/hub/owner/name/resolve/main/..%5Cpwned.gguf: the file name "..\\\\pwned.gguf" cannot be kept in the cache (it holds a path separator)\n`);
    expect(resolveModelSource('o/n/a?b#c.gguf', 'https://hub.example')).toEqual({ kind: 'url', url: 'https://hub.example/o/n/resolve/main/a%3Fb%23c.gguf' });
  });

  test('a Hub id follows the Hub\'s rule for names; anything else is a local path', () => {
    const hub = 'https://hub.example';
    expect(resolveModelSource('openai-community/gpt2', hub)).toEqual({ kind: 'url', url: 'https://hub.example/openai-community/gpt2/resolve/main/' });
    expect(resolveModelSource('a.b_c/d-e', hub)).toEqual({ kind: 'url', url: 'https://hub.example/a.b_c/d-e/resolve/main/' });
    for (const text of ['../escape', 'owner/..', './name', 'a--b/c', 'a..b/c', '-a/b', 'a/b.', `${'a'.repeat(97)}/b`]) {
      expect(resolveModelSource(text, hub)).toEqual({ kind: 'path', path: text });
    }
  });

  test('HF_ENDPOINT must be an http(s) URL', async () => {
    for (const endpoint of ['file:///etc', 'not a url', 'https://hub.example/?q=1']) {
      const { code, stderr } = await run(['--model', 'owner/name', ...GENERATE], { ...env, HF_ENDPOINT: endpoint });
      expect({ code, stderr }).toEqual({ code: 1, stderr: `gpt2-wasm: HF_ENDPOINT: expected an http(s) URL of a Hub, got ${JSON.stringify(endpoint)}\n` });
    }
    expect(server.requests).toEqual([]);
  });

  test('GPT2_WASM_CACHE_DIR is taken relative to the working folder, and a NUL in it is an error', () => {
    expect(cacheDirectory({ GPT2_WASM_CACHE_DIR: 'rel/cache' }, 'linux', '/home/u')).toBe(join(process.cwd(), 'rel/cache'));
    expect(() => cacheDirectory({ GPT2_WASM_CACHE_DIR: '/tmp/a\0b' })).toThrow('GPT2_WASM_CACHE_DIR: the path holds a NUL character');
  });

  test('a text file larger than the loader takes is refused from its Content-Length, before its body is written', async () => {
    const url = `${server.base}/text/${2 ** 20 + 1}/`;
    const { code, stderr } = await run(['--model', url, ...GENERATE], env);
    expect({ code, stderr }).toEqual({ code: 1, stderr: `gpt2-wasm: config.json: 1048577 bytes from ${url}config.json; a config.json is at most 1 MiB (not a config.json?)\n` });
    expect(filesUnder(outside)).toEqual([]);
  });

  test('a text file sent without a length is cut off once it passes the bound, and nothing is kept', async () => {
    const url = `${server.base}/chunked-text/${3 * 2 ** 20}/`;
    const { code, stderr } = await run(['--model', url, ...GENERATE], env);
    expect(code).toBe(1);
    expect(stderr).toMatch(new RegExp(`^gpt2-wasm: config\\.json: over 1048576 bytes from ${url}config\\.json; a config\\.json is at most 1 MiB \\(not a config\\.json\\?\\)\\n$`));
    expect(filesUnder(outside)).toEqual([]);
  });

  test('cachedFileName keeps ordinary names as they are', () => {
    expect(cachedFileName(new URL('https://h/m/gpt2%20small.Q4_0.gguf'))).toBe('gpt2 small.Q4_0.gguf');
    expect(cachedFileName(new URL('https://h/m/%C3%BCber.gguf'))).toBe('über.gguf');
    expect(cachedFileName(new URL('https://h/m/..gpt2.gguf'))).toBe('..gpt2.gguf');
  });
});

// The command, run on a pseudo-terminal by util-linux's script(1): -> what the terminal received.
async function onTerminal(args) {
  const { stdout } = await runCliOnTerminal(args).catch((error) => error);
  return stdout;
}

describe('text from a model on a terminal', () => {
  // OSC 8 (a hyperlink), a screen clear, a carriage return and the one-character C1 CSI.
  const TOKENS = ['\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07', '\x1b[2J', '\rspoof', '\x9b31m'];
  let folder;
  let expected;
  const args = () => ['--model', folder, '-n', String(expected.options.maxNewTokens), '--temperature', '0', '--ignore-eos', 'ROMEO:'];

  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), 'gpt2-wasm-escapes-'));
    expected = await writeModelWithRenamedTokens(folder, 'ROMEO:', TOKENS);
    for (const token of TOKENS) expect(expected.text).toContain(token);
  });
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  test('piped, the output is the raw text', async () => {
    const { stdout } = await run(args());
    expect(stdout).toBe(`${expected.text}\n`);
  });

  test('on a terminal, every control character but newline and tab is shown escaped, so none reaches the terminal', async () => {
    const terminal = await onTerminal(args());
    // No control character but the terminal's own line ends (it turns each newline into \r\n).
    expect(terminal).not.toMatch(/(?![\r\n])\p{Cc}/u);
    const shown = terminal.replaceAll('\r\n', '\n');
    expect(shown).not.toMatch(/\r/);
    expect(shown.startsWith(`${escapeControlCharacters(expected.text)}\n`)).toBe(true);
    for (const escaped of ['\\x1b]8;;http://evil.example/\\x07click\\x1b]8;;\\x07', '\\x1b[2J', '\\rspoof', '\\u009b31m']) expect(shown).toContain(escaped);
  });

  test('a GGUF file\'s metadata quoted in an error reaches a terminal escaped, and a pipe as it is', async () => {
    // general.architecture "gpt2" becomes U+009B (CSI, 2 bytes in UTF-8) + "2J": the same length, the rest unchanged.
    const gguf = readFileSync(`${ROOT}tests/fixtures/tiny-random-gguf/model-f32.gguf`);
    const at = gguf.indexOf('gpt2', gguf.indexOf('general.architecture'));
    Buffer.from('\u009b2J').copy(gguf, at);
    const path = join(folder, 'csi.gguf');
    writeFileSync(path, gguf);
    const piped = await run(['--model', path, 'hi']);
    expect(piped).toMatchObject({ code: 1, stderr: "gpt2-wasm: csi.gguf: architecture '\u009b2J' is not supported (only gpt2 is read)\n" });
    const terminal = await onTerminal(['--model', path, 'hi']);
    expect(terminal).toBe("gpt2-wasm: csi.gguf: architecture '\\u009b2J' is not supported (only gpt2 is read)\r\n");
  });

  test('escapeControlCharacters writes C0, DEL and C1 controls as escapes and keeps newline, tab and other text', () => {
    expect(escapeControlCharacters('a\tb\nc\r\x00\x1b\x7f\x80\x9b\xa0é😀\u202e')).toBe('a\tb\nc\\r\\x00\\x1b\\x7f\\u0080\\u009b\xa0é😀\u202e');
  });
});
