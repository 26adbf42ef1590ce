// Tests of the npm package as a user gets it (package.json "files", "exports", "types", "bin"): `npm pack` of
// the repository, the tarball installed into a fresh temporary project (offline: the package has no
// dependencies), then, from that project, the API imported by its name, its types checked by tsc, and the
// installed gpt2-wasm command run; publint lints the tarball. The model is the tiny-random fixture as a folder
// with its tokenizer (as gguf.test.js assembles it). The package has no bundled model, so the installed command
// without --model runs openai-community/gpt2 from the Hub: a local HTTP server (HF_ENDPOINT) stands for the Hub.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import { send, startFileServer } from './file_server.js';
import { generateInNode } from './node_generation.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FIXTURE_FILES = {  // name -> the fixture folder it comes from
  'config.json': 'tiny-random',
  'model.safetensors': 'tiny-random',
  'vocab.json': 'tiny-random-gguf',
  'merges.txt': 'tiny-random-gguf',
};
const PROMPT = 'ROMEO: the end';
const GREEDY = { temperature: 0, maxNewTokens: 12 };
const CLI_GREEDY = ['-n', '12', '--temperature', '0', PROMPT];
// What the package may hold: its manifest, README, LICENSE, the web modules and their types, the widget (one
// script, and its Subresource Integrity value), and the asset folder: the wasm engine's two builds (single-thread and threaded: the glue for Node and
// for browsers, the pthread worker) and the engine worker as one module.
const SHIPPED = /^(package\.json|README\.md|LICENSE|web\/(lib|cli)\/(\w+\/)*\w+\.(js|d\.ts)|public\/gpt2-widget\.(js|integrity\.txt)|public\/wasm\/(gpt2(-mt)?(-relaxed)?\.(cjs|mjs|wasm)|gpt2-mt(-relaxed)?\.worker\.cjs|gpt2-worker\.js))$/;

// A user's module: loads a model through the installed package and prints its greedy tokens, its thread count
// and where each export resolves.
const USER_SCRIPT = `
import { loadModel } from 'gpt2-wasm';
import { createTokenizer } from 'gpt2-wasm/tokenizer';
const [source, threads, options] = process.argv.slice(2);
const model = await loadModel(source, { threads: Number(threads) });
const tokens = [];
for await (const piece of model.generate(${JSON.stringify(PROMPT)}, JSON.parse(options))) tokens.push(piece.token);
console.log(JSON.stringify({
  tokens,
  threads: model.threads,
  createTokenizer: typeof createTokenizer,
  resolved: ['gpt2-wasm', 'gpt2-wasm/tokenizer', 'gpt2-wasm/widget', 'gpt2-wasm/package.json'].map((name) => import.meta.resolve(name)),
}));
model.dispose();
`;

// A user's TypeScript: the types come from the package's exports (an untyped import would make the
// @ts-expect-error line unused, which tsc reports).
const USER_TYPESCRIPT = `
import { loadModel, type Model } from 'gpt2-wasm';
import { createTokenizer } from 'gpt2-wasm/tokenizer';
import 'gpt2-wasm/widget';
export async function greedy(): Promise<string> {
  const model: Model = await loadModel('model/');
  // @ts-expect-error: maxNewTokens is a number
  model.generate('x', { maxNewTokens: 'many' });
  let text = '';
  for await (const piece of model.generate('x', { temperature: 0 })) text += piece.text;
  return text + createTokenizer({}, '').decode([]);
}
export const widget = GPT2Widget.mount(document.body, { model: 'model/' });
`;

jest.setTimeout(300_000);  // npm pack and install, tsc and several Node processes, on a shared machine

const run = (file, args, { cwd, env = {} } = {}) => promisify(execFile)(file, args, { cwd, env: { ...process.env, ...env }, encoding: 'utf8' });

let work;  // the temporary folder: the tarball, the user's project, the model folder and the disk cache
let tarball;
let packedFiles;
let project;
let modelDir;
let installedCli;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'gpt2-wasm-package-'));
  const [{ filename, files }] = JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: ROOT })).stdout);
  tarball = join(work, filename);
  packedFiles = files.map((file) => file.path);
  project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'package-user', private: true, type: 'module' }));
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project });
  installedCli = join(project, 'node_modules/.bin/gpt2-wasm');
  modelDir = join(work, 'tiny-random/');
  mkdirSync(modelDir);
  for (const [name, folder] of Object.entries(FIXTURE_FILES)) copyFileSync(`${ROOT}tests/fixtures/${folder}/${name}`, join(modelDir, name));
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

// The same generation through the repository's web/lib/gpt2.js.
const repositoryGeneration = (options) => generateInNode(modelDir, PROMPT, options);

async function userScript(threads) {
  writeFileSync(join(project, 'user.mjs'), USER_SCRIPT);
  const { stdout } = await run(process.execPath, ['user.mjs', modelDir, String(threads), JSON.stringify(GREEDY)], { cwd: project });
  return JSON.parse(stdout);
}

test('npm pack holds the wasm builds, the web modules and their types, the widget, README and LICENSE, and nothing else', () => {
  expect(packedFiles).toEqual(expect.arrayContaining([
    'package.json', 'README.md', 'LICENSE', 'web/lib/gpt2.js', 'web/lib/gpt2.d.ts', 'web/lib/tokenizer.js', 'web/lib/tokenizer.d.ts',
    'web/lib/widget.d.ts', 'web/cli/cli.js', 'web/lib/engine/engine.js', 'web/lib/worker/worker.js', 'public/gpt2-widget.js',
    'public/gpt2-widget.integrity.txt', 'public/wasm/gpt2.cjs',
    'public/wasm/gpt2.mjs', 'public/wasm/gpt2.wasm', 'public/wasm/gpt2-mt.cjs', 'public/wasm/gpt2-mt.mjs',
    'public/wasm/gpt2-mt.wasm', 'public/wasm/gpt2-mt.worker.cjs', 'public/wasm/gpt2-worker.js',
    'public/wasm/gpt2-relaxed.cjs', 'public/wasm/gpt2-relaxed.mjs', 'public/wasm/gpt2-relaxed.wasm',
    'public/wasm/gpt2-mt-relaxed.cjs', 'public/wasm/gpt2-mt-relaxed.mjs', 'public/wasm/gpt2-mt-relaxed.wasm',
    'public/wasm/gpt2-mt-relaxed.worker.cjs',
  ]));
  // no tests, fixtures, tools, bundled model, page or testing build
  expect(packedFiles.filter((path) => !SHIPPED.test(path))).toEqual([]);
  expect(packedFiles).not.toContain('web/page/main.js');
  expect(packedFiles).not.toContain('web/page/embed_page.js');
  expect(packedFiles).not.toContain('web/widget/widget.js');
});

test('installed from the tarball, `import { loadModel } from "gpt2-wasm"` generates the repository\'s greedy tokens, on one thread and on two', async () => {
  const { tokens } = await repositoryGeneration(GREEDY);
  const installed = join(project, 'node_modules/gpt2-wasm/');
  const oneThread = await userScript(1);
  expect(oneThread).toEqual({
    tokens,
    threads: 1,
    createTokenizer: 'function',
    resolved: ['web/lib/gpt2.js', 'web/lib/tokenizer.js', 'public/gpt2-widget.js', 'package.json'].map((path) => pathToFileURL(join(installed, path)).href),
  });
  expect(oneThread.resolved.every((url) => existsSync(fileURLToPath(url)))).toBe(true);
  // threads: 2 runs the threaded build (its glue and worker script), which would otherwise fall back to one thread
  expect(await userScript(2)).toMatchObject({ tokens, threads: 2 });
});

test('TypeScript finds the package\'s types through its exports', async () => {
  writeFileSync(join(project, 'user.ts'), USER_TYPESCRIPT);
  const args = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--lib', 'es2022,dom,dom.iterable', 'user.ts'];
  await expect(run(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, ...args], { cwd: project }))
    .resolves.toEqual({ stdout: '', stderr: '' });
});

test('the installed gpt2-wasm command generates the repository\'s text from --model DIR', async () => {
  const { text } = await repositoryGeneration(GREEDY);
  const { stdout, stderr } = await run(installedCli, ['--model', modelDir, ...CLI_GREEDY], { cwd: project });
  expect(stdout).toBe(`${text}\n`);
  expect(stderr).toMatch(/^\n\[\d+ prompt tokens .*stop: length; 1 thread; device: wasm\]\n$/);
});

describe('without --model', () => {
  let server;
  let cacheDir;
  let env;

  beforeEach(async () => {
    const files = Object.fromEntries(Object.keys(FIXTURE_FILES).map((name) => [name, readFileSync(join(modelDir, name))]));
    server = await startFileServer(files, { 'openai-community': (res, body) => send(res, body, { 'Content-Length': body.length }) });
    cacheDir = mkdtempSync(join(work, 'cache-'));
    env = { HF_ENDPOINT: server.baseUrl, GPT2_WASM_CACHE_DIR: cacheDir };
  });

  afterEach(() => server.close());

  test('the installed command downloads openai-community/gpt2 from the Hub into its cache, says so, and generates', async () => {
    const { text } = await repositoryGeneration(GREEDY);
    const { stdout, stderr } = await run(installedCli, CLI_GREEDY, { cwd: project, env });
    expect(stdout).toBe(`${text}\n`);
    expect(stderr.split('\n')[0]).toBe(
      `gpt2-wasm: no --model, so openai-community/gpt2 from the Hugging Face Hub (GPT-2 124M: 548 MB, downloaded once into ${cacheDir})`,
    );
    expect(server.requests().map((request) => request.path).sort())
      .toEqual(['config.json', 'merges.txt', 'model.safetensors', 'vocab.json'].map((name) => `/openai-community/gpt2/resolve/main/${name}`));
  });

  test('in the repository checkout, the command runs the bundled model: no request to the Hub', async () => {
    const { stderr } = await run(process.execPath, [`${ROOT}web/cli/cli.js`, ...CLI_GREEDY], { cwd: ROOT, env });
    expect(stderr).not.toMatch(/no --model/);
    expect(server.requestCount()).toBe(0);
  });
});

test('publint finds nothing to report in the packed package', async () => {
  const { stdout, stderr } = await run(`${ROOT}node_modules/.bin/publint`, ['run', tarball, '--strict'], { cwd: work });
  expect(stderr).toBe('');
  expect(stdout).toMatch(/All good!/);
});
