// How many threads of a browser realm run at once. navigator.hardwareConcurrency is what the browser says, and
// WebKit and Firefox's private mode say 4 on a 2-core machine; the engine's pool gains nothing from workers beyond
// the cores that run in parallel (its workers poll for work, so extra ones take time from the others).
// The probe measures two rates of the same loop: this thread's alone (its best over short rounds, the likeliest to
// run uninterrupted: a whole core's) and n threads' together (this one and n - 1 workers, their best summed rate over
// a window that this thread opens and closes). Together divided by alone is the cores' worth of work the n threads
// did at once: c cores run c threads' worth however many more threads there are, and other work on the machine only
// lowers it. Needs SharedArrayBuffer (a cross-origin-isolated realm): the threads meet in shared memory.

// All rounds alone come first, while the workers sleep; then the rounds together, until the n threads measure as
// n or ROUNDS have run: on a busy machine the best of many short rounds finds the moments when the cores were free.
const ALONE_MS = 1;
const ALONE_ROUNDS = 24;
const TOGETHER_MS = 1;  // long against the clock's resolution, short against other work's turns on the cores
const ROUNDS = 100;
const WARM_MS = 8;  // each thread's first run of the loop, before it is measured
// Threads' worth of work above a whole number that still counts as one more thread: other work on the machine only
// lowers the measure, so a doubtful core is given the benefit.
const PARTIAL_CORE = 0.25;
const WORKER_WAIT_MS = 1000;  // for the workers to end a round once this thread has closed it

// control: Int32Array [round started, workers done with it, round ended], shared by the threads.
const STARTED = 0;
const DONE = 1;
const ENDED = 2;

// The loop every thread runs: blocks of 1024 steps until performance.now() reaches end or control[ENDED] reaches
// round (so a worker that starts late counts only what it did while the window was open). -> the blocks. (The
// workers get this function as text: it names ENDED by its value.)
function spin(control, round, end) {
  let blocks = 0;
  let x = 1;
  while (performance.now() < end && Atomics.load(control, 2) < round) {
    for (let i = 0; i < 1024; i++) x = (Math.imul(x, 1664525) + 1013904223) | 0;
    blocks++;
  }
  return x === 0.5 ? 0 : blocks;  // x is never 0.5: this keeps the loop from being optimized away
}

// A worker: warms the loop up, says it is ready and sleeps until the first round together starts; for each round it
// spins until the round ends, writes its blocks, counts itself done and polls for the next round's start (a worker
// woken for each round would start late by however long its wake-up takes on a busy machine).
const WORKER_SOURCE = `const spin = ${spin};
onmessage = ({ data: { control, counts, index, threads, rounds, warmMs } }) => {
  spin(new Int32Array(3), 1, performance.now() + warmMs);
  postMessage('ready');
  Atomics.wait(control, ${STARTED}, 0);
  for (let round = 1; round <= rounds; round++) {
    while (Atomics.load(control, ${STARTED}) < round);
    counts[(round - 1) * threads + index] = spin(control, round, Infinity);
    Atomics.add(control, ${DONE}, 1);
  }
};
`;

// -> Promise of the threads, 1..n, that measured as running at once when n run the loop together.
export async function measureParallelThreads(n) {
  if (n <= 1) return 1;
  const control = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
  const counts = new Float64Array(new SharedArrayBuffer(ROUNDS * n * Float64Array.BYTES_PER_ELEMENT));  // [round][thread]
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'text/javascript' }));
  const workers = [];
  try {
    const ready = [];
    for (let index = 1; index < n; index++) {
      const worker = new Worker(url);
      workers.push(worker);
      ready.push(new Promise((resolve, reject) => {
        worker.onmessage = resolve;
        worker.onerror = () => reject(new Error('the core probe\'s worker did not start'));
      }));
      worker.postMessage({ control, counts, index, threads: n, rounds: ROUNDS, warmMs: WARM_MS });
    }
    await Promise.all(ready);
    const alone = new Int32Array(3);  // never ended: this thread's rounds alone end by the clock
    spin(alone, 1, performance.now() + WARM_MS);
    let aloneRate = 0;  // blocks per millisecond
    for (let round = 0; round < ALONE_ROUNDS; round++) {
      aloneRate = Math.max(aloneRate, spin(alone, 1, performance.now() + ALONE_MS) / ALONE_MS);
    }
    let togetherRate = 0;
    let threads = 1;
    for (let round = 1; round <= ROUNDS && threads < n; round++) {
      togetherRate = Math.max(togetherRate, runTogether(control, counts, round, n));
      threads = Math.max(1, Math.min(n, Math.floor(togetherRate / aloneRate + 1 - PARTIAL_CORE)));
    }
    return threads;
  } finally {
    for (const worker of workers) worker.terminate();
    URL.revokeObjectURL(url);
  }
}

// One round on all n threads: -> the blocks per millisecond they spun together while it was open. This thread waits
// for the workers by polling, since a page's main thread may not Atomics.wait; a worker not done by then counts as
// having done nothing.
function runTogether(control, counts, round, n) {
  Atomics.store(control, DONE, 0);
  const start = performance.now();
  Atomics.store(control, STARTED, round);
  Atomics.notify(control, STARTED);
  counts[(round - 1) * n] = spin(control, round, start + TOGETHER_MS);
  Atomics.store(control, ENDED, round);
  const open = performance.now() - start;
  const deadline = performance.now() + WORKER_WAIT_MS;
  while (Atomics.load(control, DONE) < n - 1 && performance.now() < deadline);
  let blocks = 0;
  for (let index = 0; index < n; index++) blocks += counts[(round - 1) * n + index];
  return blocks / open;
}
