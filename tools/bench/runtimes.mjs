// The benchmark's runtimes: each returns measure.mjs's result for one job ({ modelDir, weights, threads, kvCache,
// onnxPath?, gguf? }). Native over a pipe to build/native/gpt2 --bench; Node, onnxruntime-web and llama.cpp each in
// a Node process of their own; our engine and wllama in pages of one headless Chromium. The GPU runtimes: webgpu in a
// page of a second Chromium, launched with WebGPU (and without --disable-gpu), node-webgpu in a Node process with
// Dawn; gpuAdapters() says beforehand which adapter each would run on, or why it cannot run.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { measureModel } from './measure.mjs';
import { NODE_RELAXED_SIMD_FLAGS, REPO } from './options.mjs';
import { startServer } from '../dev/serve.mjs';

export const CHROMIUM = '/usr/bin/chromium';

// ForceEagerMeasureMemory: performance.measureUserAgentSpecificMemory() (the wllama page's memory figure) answers
// at once instead of at the next garbage collection.
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--no-first-run', '--enable-blink-features=ForceEagerMeasureMemory'];

// The webgpu runtime's Chromium: the same, with the GPU process and options.webgpuFlags.
const gpuChromiumArgs = (options) => [...CHROMIUM_ARGS.filter((arg) => arg !== '--disable-gpu'), ...options.webgpuFlags];

// The model's hyper-parameters in measure.mjs's names, from its Hugging Face config.json (a GGUF file converted
// from the folder has the same).
function modelConfig(modelDir) {
  const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
  return { n_vocab: config.vocab_size, n_ctx: config.n_positions ?? config.n_ctx, n_embd: config.n_embd, n_head: config.n_head, n_layer: config.n_layer };
}

// What our runtimes load: the GGUF file, or the folder (fp32 or int8 weights).
const modelSource = ({ modelDir, gguf }) => gguf?.file ?? modelDir;

// build/native/gpt2 --bench answers one line per command (see tools/cli/gpt2_cli.cpp).
async function runNative(job, plan, log) {
  const { modelDir, weights, threads } = job;
  const start = performance.now();
  const args = ['--model', modelSource(job), '--bench', '--threads', String(threads), '--kv-cache', job.kvCache,
    ...(weights === 'int8' ? ['--int8'] : [])];
  const child = spawn(join(REPO, 'build/native/gpt2'), args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('close', resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const answer = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`build/native/gpt2 --bench exited: ${stderr.trim() || `status ${await exited}`}`);
    return value.split(' ');
  };
  const command = async (text) => {
    child.stdin.write(`${text}\n`);
    const [token, ms] = await answer();
    return { token: Number(token), ms: Number(ms) };
  };
  const [, weightBytes, kvCacheBytes, threadsUsed] = (await answer()).map(Number);
  const loadMs = performance.now() - start;
  log(`model loaded in ${(loadMs / 1000).toFixed(1)} s`);
  const driver = {
    async info() {
      return { config: modelConfig(modelDir), weightBytes, kvCacheBytes, threads: threadsUsed };
    },
    prefill: (mode, ids) => command(`prefill ${mode} ${ids.join(',')}`),
    step: (mode, id) => command(`step ${mode} ${id}`),
    async streamWeights(repeats) {
      const output = execFileSync(join(REPO, 'build/native/gpt2_bandwidth'), ['--bytes', String(weightBytes), '--repeats', String(repeats)], { encoding: 'utf8' });
      return JSON.parse(output).ms;
    },
    // rssBytes: resident now; peakRssBytes: the process's high-water mark (VmHWM).
    async memory() {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kib = (field) => Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)[1]) * 1024;
      return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM') };
    },
    async releaseUncached() {
      child.stdin.write('release uncached\n');
      const reply = (await answer()).join(' ');
      if (reply !== 'released') throw new Error(`build/native/gpt2 --bench answered "${reply}" to "release uncached"`);
    },
  };
  try {
    return { ...(await measureModel(driver, plan, log)), loadMs };
  } finally {
    child.stdin.end();
    await exited;
  }
}

// One Node process per job (tools/bench/node_runner.mjs), so every model starts from a fresh wasm heap.
function runNode(job, plan, log) {
  return runNodeScript([...NODE_RELAXED_SIMD_FLAGS, join(REPO, 'tools/bench/node_runner.mjs'), modelSource(job), job.weights, JSON.stringify(plan),
    String(job.threads), job.simd], log);
}

// Native llama.cpp (node-llama-cpp) on the job's GGUF file, in its own Node process too.
function runLlamaCpp({ modelDir, gguf, threads }, plan, log, options) {
  const args = [join(REPO, 'tools/bench/llama_cpp_runner.mjs'), options.nodeLlamaCpp, gguf.file, JSON.stringify(modelConfig(modelDir)),
    JSON.stringify(plan), String(threads)];
  return runNodeScript(args, log);
}

// onnxruntime-web in its own Node process too; --expose-gc lets it collect the model file before reading RSS.
function runOrt({ modelDir, onnxPath }, plan, log) {
  return runNodeScript(['--expose-gc', join(REPO, 'tools/bench/ort_runner.mjs'), modelDir, onnxPath, JSON.stringify(plan)], log);
}

// node-webgpu: the wasm engine with Dawn in a Node process of its own (tools/bench/node_webgpu_runner.mjs).
function runNodeWebgpu(job, plan, log, options) {
  return runNodeScript([join(REPO, 'tools/bench/node_webgpu_runner.mjs'), options.nodeWebgpu, modelSource(job), job.weights, JSON.stringify(plan)], log);
}

// Runs a runner script (arguments after node's) that prints its result (measure.mjs's, or speculation_runner.mjs's)
// as JSON on stdout.
export async function runNodeScript(args, log) {
  const script = relative(REPO, args.find((arg) => arg.endsWith('.mjs')));
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  createInterface({ input: child.stderr }).on('line', (line) => {
    stderr += `${line}\n`;
    log(line);
  });
  const status = await new Promise((resolve) => child.on('close', resolve));
  if (status !== 0) throw new Error(`${script} failed (status ${status}):\n${stderr.trim()}`);
  return JSON.parse(stdout);
}

let chromium = null;  // { server, browsers: Map(arguments -> browser) }, each started on first use

// A new page at path (under the repository root, which the server serves cross-origin isolated, so workers can run
// threaded builds) of the bench's Chromium launched with args; run(page, origin) -> its result. One page per job, so
// every job starts from fresh wasm heaps.
async function inChromiumPage(path, log, run, args = CHROMIUM_ARGS) {
  if (!chromium) {
    // The bench's own pages run inline modules: not under the site's policy.
    const server = await startServer({ port: 0, root: REPO, contentSecurityPolicy: null });
    chromium = { server, browsers: new Map() };
  }
  const key = args.join(' ');
  if (!chromium.browsers.has(key)) {
    const { chromium: launcher } = await import('@playwright/test');
    chromium.browsers.set(key, await launcher.launch({ executablePath: CHROMIUM, args }));
  }
  const origin = `http://127.0.0.1:${chromium.server.address().port}`;
  const page = await chromium.browsers.get(key).newPage();
  page.on('console', (message) => log(message.text()));
  page.setDefaultTimeout(0);
  try {
    await page.goto(`${origin}/${path}`);
    return await run(page, origin);
  } finally {
    await page.close();
  }
}

// Our engine in a worker of tools/bench/browser.html: the folder's URL (with a trailing slash) or the GGUF file's.
function runChromium(job, plan, log) {
  const source = job.gguf ? relative(REPO, job.gguf.file) : `${relative(REPO, job.modelDir)}/`;
  return inChromiumPage('tools/bench/browser.html', log, (page, origin) => page.evaluate(([url, format, workerPlan, workerThreads, simd]) =>
    window.runBench(url, format, workerPlan, workerThreads, 'wasm', simd), [`${origin}/${source}`, job.weights, plan, job.threads, job.simd]));
}

// Our engine with its passes on the GPU, in a worker of tools/bench/browser.html in the WebGPU Chromium.
function runWebgpu(job, plan, log, options) {
  const source = job.gguf ? relative(REPO, job.gguf.file) : `${relative(REPO, job.modelDir)}/`;
  return inChromiumPage('tools/bench/browser.html', log, (page, origin) => page.evaluate(([url, format, workerPlan]) =>
    window.runBench(url, format, workerPlan, 1, 'webgpu'), [`${origin}/${source}`, job.weights, plan]), gpuChromiumArgs(options));
}

// The adapter each GPU runtime among runtimes would run on: { [runtime]: { adapterInfo } | { reason } }.
export async function gpuAdapters(runtimes, options) {
  const adapters = {};
  if (runtimes.includes('webgpu')) {
    adapters.webgpu = await inChromiumPage('tools/bench/browser.html', () => {}, (page) => page.evaluate(() => window.gpuAdapter()),
      gpuChromiumArgs(options));
  }
  if (runtimes.includes('node-webgpu')) adapters['node-webgpu'] = await nodeWebgpuAdapter(options.nodeWebgpu);
  return adapters;
}

// node-webgpu's adapter, asked in a process of its own; Dawn says on stderr why it has none (no Vulkan loader or
// driver, a driver it cannot use), which the reason then quotes.
async function nodeWebgpuAdapter(dir) {
  if (!existsSync(join(dir, 'package.json'))) {
    const where = dir.startsWith(`${REPO}/`) ? relative(REPO, dir) : dir;
    return { reason: `the npm package webgpu is not installed in ${where} (it is no dependency: npm install --no-save ` +
      'webgpu in tools/bench, or name its folder with --node-webgpu DIR or NODE_WEBGPU=DIR)' };
  }
  const child = spawn(process.execPath, [join(REPO, 'tools/bench/node_webgpu_runner.mjs'), '--probe', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const status = await new Promise((resolve) => child.on('close', resolve));
  const why = stderr.split('\n').map((line) => line.trim()).find((line) => line && !line.startsWith('at ') && !line.startsWith('- '));
  let answer;
  try {
    answer = JSON.parse(stdout);
  } catch {
    return { reason: `tools/bench/node_webgpu_runner.mjs --probe failed (status ${status})${why ? `: ${why}` : ''}` };
  }
  return answer.reason && why ? { reason: `${answer.reason}: ${why}` } : answer;
}

// wllama in tools/bench/wllama.html, on the job's GGUF file; its prompts are the text of the prompt pool's words.
function runWllama({ modelDir, gguf, threads, promptWords }, plan, log) {
  return inChromiumPage('tools/bench/wllama.html', log, (page, origin) => page.evaluate((bench) => window.runWllamaBench(bench),
    { fileUrl: `${origin}/${relative(REPO, gguf.file)}`, config: modelConfig(modelDir), threads, words: promptWords, plan }));
}

export async function closeChromium() {
  if (!chromium) return;
  for (const browser of chromium.browsers.values()) await browser.close();
  await new Promise((resolve) => chromium.server.close(resolve));
  chromium = null;
}

export const RUNTIMES = { native: runNative, node: runNode, chromium: runChromium, ort: runOrt, wllama: runWllama, llamacpp: runLlamaCpp,
  webgpu: runWebgpu, 'node-webgpu': runNodeWebgpu };
