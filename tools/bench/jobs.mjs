// What a benchmark run measures: the machine, the build and models it needs, and its jobs, one per model, runtime,
// weights, KV cache and thread count, with the GGUF files they load.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ensureGguf, ggufDecodeBytes, isGguf } from './gguf_files.mjs';
import { adapterName } from '../../web/lib/gpu/device.js';
import { GPU_KV_CACHE } from './gpu_driver.mjs';
import { BENCH_PACKAGES, GPU_RUNTIMES, INT8_UNCACHED_MAX_CONTEXT, MODELS, ONNX_EXPORT_COMMAND, OTHER_ENGINES, OTHER_KV_CACHES, RANDOM_MODEL_MODULE,
  REPO, WASM_RUNTIMES } from './options.mjs';
import { runPython } from './python_tools.mjs';
import { CHROMIUM } from './runtimes.mjs';

// The checked-out commit, for the chart's caption ("unknown" outside a git checkout).
export function commit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

export function machineInfo(runtimes) {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  return {
    cpu: /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism?.() ?? os.cpus().length,
    memoryBytes: os.totalmem(),
    node: process.version,
    chromium: runtimes.some((runtime) => ['chromium', 'wllama', 'webgpu'].includes(runtime)) ? execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() : null,
    loadAverage: os.loadavg().map((load) => Number(load.toFixed(2))),
  };
}

// baseline: --baseline's checkout, whose engine the inspection section loads (the first --simd build, threaded where
// the first thread count is more than one).
export function checkBuild(runtimes, threads, simds, baseline) {
  // our wasm runtimes' testing builds: each --simd build, and its threaded variant where threads are asked for
  const suffixes = simds.map((simd) => (simd === 'relaxed' ? '-relaxed' : ''));
  const wasmBuilds = suffixes.flatMap((suffix) => [`build/wasm-testing/gpt2${suffix}-testing.wasm`,
    ...(threads.some((n) => n > 1) ? [`build/wasm-testing/gpt2-mt${suffix}-testing.wasm`] : [])]);
  const needed = { native: ['build/native/gpt2', 'build/native/gpt2_bandwidth'], node: wasmBuilds,
    chromium: [...wasmBuilds, 'public/js/lib/engine/engine.js'],
    ort: ['build/wasm-testing/gpt2-testing.wasm', `${BENCH_PACKAGES}/onnxruntime-web/package.json`],
    wllama: ['build/wasm-testing/gpt2-testing.wasm', 'public/js/lib/engine/engine.js', `${BENCH_PACKAGES}/@wllama/wllama/package.json`],
    llamacpp: ['build/native/gpt2_bandwidth'], webgpu: ['public/js/lib/engine/engine.js', 'public/js/lib/gpu/gpu_model.js'],
    'node-webgpu': ['public/wasm/gpt2.wasm'] };
  const missing = runtimes.flatMap((runtime) => needed[runtime]).filter((path) => !existsSync(join(REPO, path)));
  if (missing.length > 0) {
    throw new Error(`not built: ${[...new Set(missing)].join(', ')} (run npm run build; npm run bench installs ${BENCH_PACKAGES})`);
  }
  const baselineBuild = `public/wasm/gpt2${threads[0] > 1 ? '-mt' : ''}${suffixes[0]}.wasm`;
  const baselineMissing = baseline ? ['web/lib/engine/engine.js', baselineBuild].filter((path) => !existsSync(join(baseline, path))) : [];
  if (baselineMissing.length > 0) {
    throw new Error(`--baseline: ${baseline} has no ${baselineMissing.join(' or ')} (a checkout with its wasm built: tools/dev/build.sh)`);
  }
}

export function ensureModel(name) {
  const model = MODELS[name];
  const dir = join(REPO, model.dir);
  if (existsSync(join(dir, 'model.safetensors'))) return dir;
  if (!model.generate) throw new Error(`${name}: ${model.missing}`);
  console.error(`${name}: ${model.dir} is missing, generating it (${[RANDOM_MODEL_MODULE, ...model.generate].join(' ')})`);
  runPython(['-m', RANDOM_MODEL_MODULE, ...model.generate], { stdio: 'inherit' });
  return dir;
}

// Every (model, runtime, weights, KV cache, SIMD build, threads) to measure, in order, and notes on the combinations left out. An explicitly
// requested ort whose ONNX export is missing is an error before anything runs; llamacpp without node-llama-cpp is
// skipped with a note, and so is a GPU runtime without an adapter (options.gpuAdapters: runtimes.mjs's gpuAdapters()),
// or on a software one unless --runtimes names it (as loadModel's 'auto' never picks one).
export function planJobs(options, modelDirs) {
  const jobs = [];
  const notes = [];
  for (const model of options.models) {
    for (const runtime of options.runtimes) {
      const supported = OTHER_ENGINES[runtime];
      let weightsList = supported ? options.weights.filter((weights) => supported.includes(weights)) : options.weights;
      if (MODELS[model].large && weightsList.includes('fp32')) {
        notes.push(`${model} ${runtime}: fp32 weights are not measured on the large shapes (int8 and GGUF are)`);
        weightsList = weightsList.filter((weights) => weights !== 'fp32');
      }
      if (weightsList.length === 0) {
        notes.push(`${model} ${runtime}: it runs ${runtime === 'ort' ? 'fp32' : 'GGUF'} weights only, and --weights has none`);
        continue;
      }
      const skipped = skipReason(runtime, model, options);
      if (skipped) {
        notes.push(`skipped ${model} ${runtime}: ${skipped}`);
        continue;
      }
      const gpu = GPU_RUNTIMES.includes(runtime);
      // onnxruntime-web runs one thread only; so does the engine under the GPU, whose passes are not the CPU's
      const threadCounts = runtime === 'ort' || gpu ? [1] : options.threads;
      const kvCaches = supported ? [OTHER_KV_CACHES[runtime]] : gpu ? [GPU_KV_CACHE] : options.kvCaches;
      // the wasm build applies to our wasm runtimes; natively and for the other engines simd is null
      const simds = WASM_RUNTIMES.includes(runtime) ? options.simds : [null];
      for (const weights of weightsList) {
        for (const kvCache of kvCaches) {
          for (const simd of simds) {
            for (const threads of threadCounts) {
              jobs.push({ model, runtime, weights, threads, kvCache, defaultKv: kvCache === kvCaches[0], simd, defaultSimd: simd === simds[0],
                modelDir: modelDirs[model] });
            }
          }
        }
      }
    }
  }
  for (const job of jobs.filter((j) => j.runtime === 'ort')) job.onnxPath = join(REPO, MODELS[job.model].onnx);
  return { jobs, notes };
}

// Why a runtime cannot measure a model in this run (null when it can).
function skipReason(runtime, model, options) {
  if (runtime === 'ort') {
    const onnx = MODELS[model].onnx;
    if (!onnx) return 'onnxruntime-web is measured on the 124m model only';
    if (existsSync(join(REPO, onnx))) return null;
    const message = `${onnx} is missing; create it with ${ONNX_EXPORT_COMMAND} (PyTorch)`;
    if (options.runtimesGiven) throw new Error(`${model} ort: ${message}`);
    return message;
  }
  if (GPU_RUNTIMES.includes(runtime)) {
    const { adapterInfo, reason } = options.gpuAdapters[runtime];
    if (!adapterInfo) return `unavailable: ${reason}`;
    if (adapterInfo.software && !options.runtimesGiven) {
      return `the adapter ${adapterName(adapterInfo)} is a software renderer: measured only when --runtimes names ${runtime}`;
    }
    return null;
  }
  if (runtime === 'llamacpp') {
    if (!options.nodeLlamaCpp) return 'node-llama-cpp is not a dependency; name its folder with --node-llama-cpp DIR or NODE_LLAMA_CPP=DIR';
    if (!existsSync(join(options.nodeLlamaCpp, 'dist/index.js'))) return `no node-llama-cpp in ${options.nodeLlamaCpp} (dist/index.js)`;
  }
  return null;
}

// Contexts with uncached runs: every context for fp32, up to INT8_UNCACHED_MAX_CONTEXT for int8 and the GGUF types,
// none for the other engines and the large shapes.
export function uncachedContexts(job, contexts) {
  if (OTHER_ENGINES[job.runtime] || MODELS[job.model].large) return [];
  return job.weights === 'fp32' ? contexts : contexts.filter((c) => c <= INT8_UNCACHED_MAX_CONTEXT);
}

// Converts the GGUF files the jobs need (only those) and reads what a decode step reads from each: job.gguf =
// { file, fileBytes, decodeBytes, types }.
export function prepareGguf(jobs) {
  const files = new Map();
  for (const job of jobs.filter((j) => isGguf(j.weights))) {
    const key = `${job.model} ${job.weights}`;
    if (!files.has(key)) {
      const file = ensureGguf(REPO, job.modelDir, job.model, job.weights, (text) => console.error(`${job.model}: ${text}`));
      files.set(key, { file, ...ggufDecodeBytes(REPO, file) });
    }
    job.gguf = files.get(key);
  }
}
