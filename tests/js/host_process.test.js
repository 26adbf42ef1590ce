// The engine in a host's Node process leaves the process's own handlers alone: Emscripten's Node glue installs
// uncaughtException and unhandledRejection handlers that rethrow (exit code 7) unless the build says otherwise
// (-sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0, wasm/CMakeLists.txt). Each host runs in a child process, with
// the single-thread and the threaded build.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';

const run = promisify(execFile);
const GPT2 = new URL('../../web/lib/gpt2.js', import.meta.url).href;
const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));

jest.setTimeout(60_000);

// A host that loads the model, installs its own handler, then fails in the way given, and generates afterwards.
const host = (threads, fail) => `
  const { loadModel } = await import(${JSON.stringify(GPT2)});
  const model = await loadModel(${JSON.stringify(BUNDLED)}, { threads: ${threads} });
  process.on('uncaughtException', (error) => console.log('host caught', error.message));
  process.on('unhandledRejection', (reason) => console.log('host caught', reason.message));
  ${fail}
  setTimeout(async () => {
    let text = '';
    for await (const piece of model.generate('ROMEO:', { maxNewTokens: 4, temperature: 0 })) text += piece.text;
    console.log('generated', JSON.stringify(text));
    model.dispose();
  }, 100);
`;

describe.each([1, 2])('a Node host with threads: %i', (threads) => {
  test.each([
    ['throws in a timer', "setTimeout(() => { throw new Error('boom'); }, 0);"],
    ['rejects a promise nobody awaits', "Promise.reject(new Error('boom'));"],
  ])('that %s keeps its process alive with its own handler, and the model still generates', async (what, fail) => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', host(threads, fail)]);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe('host caught boom');
    expect(lines[1]).toMatch(/^generated ".+"$/);
  });
});
