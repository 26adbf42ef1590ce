// Run by long_work.test.js as `node --expose-gc tests/js/dropped_runs.js`, so that it can force garbage collection:
// 100 generations of the bundled model, each iterated once and then dropped without return() (one run, two
// sequences, beams), then collected. Prints one line of JSON: { heapBefore, heapWhileHeld, heapAfter (the wasm
// heap's malloc'ed bytes), textBefore, textAfter (the same greedy text before and after) }.
import { fileURLToPath } from 'node:url';
import { setImmediate } from 'node:timers/promises';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const RUNS = 100;

const model = await loadModel(BUNDLED, { threads: 1 });
const engine = await loadEngine();  // the model's: the single-thread build

async function greedyText() {
  let text = '';
  for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 16 })) text += piece.text;
  return text;
}

// Collects until the finalizers have run (they run in tasks of their own after a collection) and the heap holds still.
async function collect() {
  let used = engine.heapUsedBytes();
  for (let round = 0; round < 20; round++) {
    global.gc();
    await setImmediate();
    const now = engine.heapUsedBytes();
    if (now === used && round >= 2) break;
    used = now;
  }
  return used;
}

const textBefore = await greedyText();
const heapBefore = await collect();
const held = [];
for (let i = 0; i < RUNS; i++) {
  const kind = i % 3;  // a run of one sequence, of two sequences, and beam search
  const options = { maxNewTokens: 8, seed: i, ...(kind === 1 ? { numReturnSequences: 2 } : {}), ...(kind === 2 ? { numBeams: 2, temperature: 0 } : {}) };
  const iterator = model.generate(`ROMEO ${i}:`, options)[Symbol.asyncIterator]();
  await iterator.next();
  held.push(iterator);
}
const heapWhileHeld = engine.heapUsedBytes();
held.length = 0;  // dropped, never returned
const heapAfter = await collect();
const textAfter = await greedyText();
model.dispose();
console.log(JSON.stringify({ heapBefore, heapWhileHeld, heapAfter, textBefore, textAfter }));
