// gpt2-wasm (web/cli/cli.js) run as a user runs it, in a child process of its own: for the CLI's suites.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const CLI_PATH = fileURLToPath(new URL('../../web/cli/cli.js', import.meta.url));

// -> Promise of { stdout, stderr }; a failing command rejects with an error that carries code, stdout and stderr.
export function runCli(args, env = {}) {
  return promisify(execFile)('node', [CLI_PATH, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
}

// The command run on a pseudo-terminal by util-linux's script(1), which reports a width of 0 columns:
// -> Promise of { stdout: what the terminal received, stderr }, rejecting as runCli's does.
export function runCliOnTerminal(args, env = {}) {
  const command = ['node', CLI_PATH, ...args].map((word) => `'${word}'`).join(' ');
  return promisify(execFile)('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', env: { ...process.env, ...env } });
}
