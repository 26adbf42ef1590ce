// The benchmark's command line (tools/bench/bench.mjs's flags) and what it chooses among: the models, the weight
// formats, the KV cache storages, the default plan.
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GGUF_TYPES } from './gguf_files.mjs';

export const REPO = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

// The other engines' packages (tools/bench/package.json), which tools/dev/setup.sh --bench installs: the runners'
// imports of them resolve there, and the wllama page loads them from there.
export const BENCH_PACKAGES = 'tools/bench/node_modules';

// generate: the arguments of the module that writes a missing model's folder.
export const RANDOM_MODEL_MODULE = 'gpt2tools.fixtures.make_random_gpt2';

export const MODELS = {
  tiny: { dir: 'public/models/tiny-shakespeare', missing: 'the bundled model is missing (train it with gpt2tools.training.train_tiny, or run with --models 124m)' },
  '124m': { dir: 'build/models/gpt2-124m-random', generate: [], onnx: 'build/onnx/gpt2-124m-random/decoder.onnx' },
  // The larger GPT-2 shapes, random F16 weights (half the download of F32, generated once): measured cached only,
  // with int8 and GGUF weights (fp32 774M and 1.5B do not fit wasm32's memory), for load time, memory and decode speed.
  ...Object.fromEntries(['355m', '774m', '1558m'].map((shape) => [shape, { dir: `build/models/gpt2-${shape}-random`, large: true,
    generate: ['--shape', shape, '--dtype', 'F16', '--out', join(REPO, `build/models/gpt2-${shape}-random`)] }])),
};

export const ONNX_EXPORT_COMMAND = 'PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.convert.export_onnx';

// Runtimes of other engines (cached decoding only), and the weights each runs.
export const OTHER_ENGINES = { ort: ['fp32'], wllama: GGUF_TYPES, llamacpp: GGUF_TYPES };

// Runtimes of our engine with its passes on the GPU (web/lib/gpu/): the webgpu runtime in Chromium, node-webgpu in
// Node with Dawn (the npm package webgpu). They run one engine thread and the GPU's fp32 KV cache, whatever --threads
// and --kv-cache say, and every weight type.
export const GPU_RUNTIMES = ['webgpu', 'node-webgpu'];

// Chromium's flags for the webgpu runtime (--webgpu-flags replaces them): WebGPU on Linux, and the adapter Chromium
// offers, a hardware one where there is a Vulkan driver, else its own SwiftShader. --webgpu-flags
// '--enable-unsafe-webgpu --use-webgpu-adapter=swiftshader' pins SwiftShader, as the Playwright webgpu project does.
const DEFAULT_WEBGPU_FLAGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan'];

// Where node-webgpu looks for the webgpu package when neither --node-webgpu nor NODE_WEBGPU names a folder. It is no
// dependency of tools/bench/package.json: it is large (Dawn for every platform) and runs only with a Vulkan driver.
const DEFAULT_NODE_WEBGPU = 'tools/bench/node_modules/webgpu';

const WEIGHTS = ['fp32', 'int8', ...GGUF_TYPES];

// The GGUF types are measured when --weights names them.
const DEFAULT_WEIGHTS = ['fp32', 'int8'];

const CACHED_DECODE_STEPS = 16;

export const CEILING_REPEATS = 20;

export const INT8_UNCACHED_MAX_CONTEXT = 256;

const KV_CACHES = ['int8', 'fp32'];

// Our wasm runtimes (node, chromium) run each of --simd's builds (web/lib/engine/simd_support.js): 'relaxed' (what
// Chrome 114+ and Firefox 145+ run, and Node when GPT2_WASM_SIMD=relaxed) and 'simd128' (Safari, Node by default).
// Node 20 validates relaxed SIMD only with these V8 flags, which its runners always get, so that both builds run
// under the same flags.
export const SIMD_BUILDS = ['relaxed', 'simd128'];
export const SIMD_NAMES = { relaxed: 'relaxed SIMD', simd128: 'SIMD128' };
export const WASM_RUNTIMES = ['node', 'chromium'];
export const NODE_RELAXED_SIMD_FLAGS = Number(process.versions.node.split('.')[0]) >= 22 ? [] : ['--experimental-wasm-relaxed-simd', '--no-liftoff'];

// The KV cache storage of the other engines, for the records.
export const OTHER_KV_CACHES = { ort: 'fp32', wllama: 'f16', llamacpp: 'f16' };

// runtimeNames: the runtimes --runtimes may name (the default: all of them).
export function parseArgs(argv, runtimeNames) {
  const options = { models: ['tiny', '124m'], runtimes: runtimeNames, weights: DEFAULT_WEIGHTS, contexts: [16, 64, 256, 512, 1000],
    runs: 5, decodeSteps: CACHED_DECODE_STEPS, runtimesGiven: false, threads: [1], kvCaches: ['int8'], simds: ['relaxed'], nodeLlamaCpp: process.env.NODE_LLAMA_CPP || null,
    webgpuFlags: DEFAULT_WEBGPU_FLAGS, nodeWebgpu: process.env.NODE_WEBGPU || join(REPO, DEFAULT_NODE_WEBGPU), baseline: null };
  const list = (value) => value.split(',').map((item) => item.trim()).filter(Boolean);
  const positiveIntegers = (flag, value) => list(value).map((item) => {
    const n = Number(item);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`${flag}: expected positive integers, got "${value}"`);
    return n;
  });
  let runsGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag}: missing value`);
      return argv[++i];
    };
    if (flag === '--models') options.models = list(value());
    else if (flag === '--runtimes') [options.runtimes, options.runtimesGiven] = [list(value()), true];
    else if (flag === '--weights') options.weights = list(value()).flatMap((weights) => (weights === 'gguf' ? GGUF_TYPES : [weights]));
    else if (flag === '--contexts') options.contexts = positiveIntegers(flag, value());
    else if (flag === '--runs') [options.runs, runsGiven] = [positiveIntegers(flag, value())[0], true];
    else if (flag === '--quick') Object.assign(options, { contexts: [16, 64], decodeSteps: 8, quick: true });
    else if (flag === '--threads') options.threads = positiveIntegers(flag, value());
    else if (flag === '--kv-cache') options.kvCaches = [...new Set(list(value()))];
    else if (flag === '--simd') options.simds = [...new Set(list(value()))];
    else if (flag === '--node-llama-cpp') options.nodeLlamaCpp = value();
    else if (flag === '--webgpu-flags') options.webgpuFlags = value().split(/\s+/).filter(Boolean);
    else if (flag === '--node-webgpu') options.nodeWebgpu = value();
    else if (flag === '--baseline') options.baseline = resolve(value());
    else {
      throw new Error(`unknown option ${flag} (use --models, --runtimes, --weights, --contexts, --runs, --quick, --threads, --kv-cache, --simd, ` +
        '--node-llama-cpp, --webgpu-flags, --node-webgpu, --baseline)');
    }
  }
  if (options.quick && !runsGiven) options.runs = 3;
  for (const model of options.models) if (!MODELS[model]) throw new Error(`--models: unknown model "${model}" (${Object.keys(MODELS).join(', ')})`);
  for (const runtime of options.runtimes) if (!runtimeNames.includes(runtime)) throw new Error(`--runtimes: unknown runtime "${runtime}" (${runtimeNames.join(', ')})`);
  for (const weights of options.weights) if (!WEIGHTS.includes(weights)) throw new Error(`--weights: unknown weights "${weights}" (${WEIGHTS.join(', ')}, gguf)`);
  options.weights = [...new Set(options.weights)];
  for (const kv of options.kvCaches) if (!KV_CACHES.includes(kv)) throw new Error(`--kv-cache: unknown KV cache "${kv}" (${KV_CACHES.join(', ')})`);
  for (const simd of options.simds) if (!SIMD_BUILDS.includes(simd)) throw new Error(`--simd: unknown build "${simd}" (${SIMD_BUILDS.join(', ')})`);
  if (options.baseline && !options.runtimes.includes('node')) throw new Error('--baseline: runs in the node runtime, which --runtimes leaves out');
  // Each uncached run decodes one token that is checked against the cached run's tokens.
  options.decodeSteps = Math.max(options.decodeSteps, options.runs);
  return options;
}
