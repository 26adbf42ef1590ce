// gpt2-wasm (web/cli/cli.js) run as a user runs it, in a child process of its own: for the CLI's suites.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const CLI_PATH = fileURLToPath(new URL('../../web/cli/cli.js', import.meta.url));

// This process's V8 flags for WebAssembly (the relaxed-SIMD lane of npm test runs Node 20 with
// --experimental-wasm-relaxed-simd --no-liftoff), given to the CLI too: it then runs the same wasm build as the API
// its output is compared with, where the two builds' logits differ by rounding.
const WASM_FLAGS = process.execArgv.filter((flag) => flag.startsWith('--experimental-wasm-') || flag === '--no-liftoff');

// -> Promise of { stdout, stderr }; a failing command rejects with an error that carries code, stdout and stderr.
export function runCli(args, env = {}) {
  return promisify(execFile)('node', [...WASM_FLAGS, CLI_PATH, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
}

// The command run on a pseudo-terminal by util-linux's script(1), which reports a width of 0 columns:
// -> Promise of { stdout: what the terminal received, stderr }, rejecting as runCli's does.
export function runCliOnTerminal(args, env = {}) {
  const command = ['node', ...WASM_FLAGS, CLI_PATH, ...args].map((word) => `'${word}'`).join(' ');
  return promisify(execFile)('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', env: { ...process.env, ...env } });
}
