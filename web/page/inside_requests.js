// The Inside the model view's calls of model.inspect(), the costly part of the view (a fresh pass over a window,
// and the logit lens's LM head per layer and position): one at a time, only the latest one wanted, at once while
// the model is idle and while it generates at most about once a second, and never more than a tenth of the time, so
// that the generation keeps its speed.
const MIN_INTERVAL_MS = 1000;
const MAX_SHARE_OF_TIME = 0.1;

export class InspectQueue {
  #busy;           // () -> whether the model is generating
  #wanted = null;  // { key, run: () -> Promise, done(error, result) }
  #runningKey = null;
  #timer = null;
  #lastEnd = 0;
  #lastMs = 0;

  constructor(busy) {
    this.#busy = busy;
  }

  // Asks for job, replacing the one wanted before (not the one running).
  want(job) {
    if (job.key === this.#runningKey || job.key === this.#wanted?.key) return;
    this.#wanted = job;
    this.#schedule();
  }

  // Forgets the job wanted (the view closed).
  drop() {
    this.#wanted = null;
    clearTimeout(this.#timer);
    this.#timer = null;
  }

  // The model's state changed (a generation ended): the wanted job may run sooner.
  poke() {
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#schedule();
  }

  #schedule() {
    if (this.#runningKey !== null || this.#timer !== null || !this.#wanted) return;
    const interval = Math.max(MIN_INTERVAL_MS, this.#lastMs / MAX_SHARE_OF_TIME);
    const wait = this.#busy() ? Math.max(0, this.#lastEnd + interval - performance.now()) : 0;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#start();
    }, wait);
  }

  async #start() {
    const job = this.#wanted;
    if (!job) return;
    this.#wanted = null;
    this.#runningKey = job.key;
    const started = performance.now();
    let result = null, failure = null;
    try {
      result = await job.run();
    } catch (error) {
      failure = error;
    }
    this.#lastEnd = performance.now();
    this.#lastMs = this.#lastEnd - started;
    this.#runningKey = null;
    job.done(failure, result);
    this.#schedule();
  }
}
