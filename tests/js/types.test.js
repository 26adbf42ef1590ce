// The TypeScript declarations of the public API (web/lib/gpt2.d.ts, web/lib/tokenizer.d.ts, web/lib/widget.d.ts) type-check
// tests/types/example.ts, which uses every declared API as README.md shows it, and reject the wrong uses its
// @ts-expect-error lines make (tsc reports an expect-error line that is not an error).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = `${ROOT}node_modules/typescript/bin/tsc`;

// -> { code, output }: tsc's exit status and everything it printed.
async function typeCheck(project) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [TSC, '-p', project], { cwd: ROOT });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    if (typeof error.code !== 'number') throw error;  // tsc did not run
    return { code: error.code, output: error.stdout + error.stderr };
  }
}

test('the typed example of the public API passes tsc --noEmit with no diagnostics', async () => {
  expect(await typeCheck('tests/types')).toEqual({ code: 0, output: '' });
}, 60_000);
