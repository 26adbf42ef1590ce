// generate()'s numReturnSequences > 1 (runSequences). Plain ES module.
import { yieldToEventLoop } from './event_loop.js';
import { makePiece } from './pieces.js';
import { promptIds } from './prompt.js';
import { updateContextStats } from './run_stats.js';
import { samplingSettings } from './sampling_settings.js';
import { acquireSessions } from './session_pool.js';
import { StopStringFilter } from './stop_strings.js';

// numReturnSequences > 1: the prompt is prefilled once and the other sequences fork its KV cache; then each step
// feeds every live sequence its token in one batched pass (EngineSession.stepSequences), the weights read once
// for all. Sequence i samples with seed + i (sequence 0 is the run without numReturnSequences), has its own
// decoder and stop filter, and ends on its own; its pieces carry `sequence: i`. sequences receives each one's
// { tokens, text, score (the sum of its tokens' log-probabilities under the model), stopReason }.
export async function* runSequences({ pool, tokenizer }, prompt, options, stats, sequences) {
  const n = options.numReturnSequences;
  const sessions = [];
  try {
    acquireSessions(pool, options, n, sessions, { method: 'stepSequences', option: 'numReturnSequences' });
    const eos = tokenizer.eosId;
    const ids = promptIds(tokenizer, prompt);
    stats.promptTokens = ids.length;
    const started = performance.now();
    const live = startSequences(sessions, tokenizer, ids, options, sequences);
    stats.reusedTokens = sessions[0].reusedTokens;
    let ms = (stats.prefillMs = performance.now() - started);
    let decodeMs = 0;
    let decoded = 0;
    let lastReason = null;  // the run's: that of the sequence that ended last
    const finish = function* (run, reason) {
      run.sequence.stopReason = lastReason = reason;
      if (reason === 'stop') return;
      for (const piece of run.filter.finish(run.decoder.flush())) yield tagged(run, piece);
    };
    const tagged = (run, piece) => {
      run.sequence.text += piece.text;
      return { ...piece, sequence: run.index };
    };
    while (live.length > 0) {
      for (const run of [...live]) {
        const ended = run.token === eos && options.stopAtEndOfText ? 'eos' : null;
        if (!ended) {
          stats.generatedTokens++;
          run.sequence.tokens.push(run.token);
          run.sequence.score += Math.log(run.session.distribution(run.token, 0, -1).probability);
          const piece = makePiece(run.session, tokenizer, run.decoder, { token: run.token, row: -1 }, ids.length + run.sequence.tokens.length - 1, ms, options);
          const { pieces, stopped } = run.filter.push(piece);
          for (const released of pieces) yield tagged(run, released);
          if (!stopped && run.sequence.tokens.length < options.maxNewTokens) continue;
          yield* finish(run, stopped ? 'stop' : 'length');
        } else {
          yield* finish(run, ended);
        }
        live.splice(live.indexOf(run), 1);
      }
      updateContextStats(stats, sessions[0]);
      if (live.length === 0) break;
      await yieldToEventLoop();
      if (options.signal?.aborted) {
        for (const run of live) yield* finish(run, 'abort');
        stats.stopReason = 'abort';
        return;
      }
      const stepStarted = performance.now();
      const next = live[0].session.stepSequences(live.map((run) => run.session), live.map((run) => run.token));
      const stepMs = performance.now() - stepStarted;
      ms = stepMs / live.length;
      decodeMs += stepMs;
      decoded += live.length;
      stats.decodeTokensPerSecond = (decoded * 1000) / decodeMs;
      live.forEach((run, i) => (run.token = next[i]));
    }
    stats.stopReason = lastReason;
  } catch (error) {
    stats.stopReason = 'error';
    throw error;
  } finally {
    stats.stopReason ??= 'abort';
    // sequence 0's session last: the one the pool keeps, whose window a Continue of sequence 0 reuses
    for (const session of sessions.reverse()) pool.release(session, options);
  }
}

// Prefills ids in sessions[0] and forks the others from it -> each sequence's run state, with its first token.
function startSequences(sessions, tokenizer, ids, options, sequences) {
  const shared = samplingSettings(options, tokenizer);  // badWords tokenized once for all the sequences
  const settings = (i) => ({ ...shared, seed: (options.seed + i) % 2 ** 53 });
  sessions[0].setSampling(settings(0));
  const first = sessions[0].prefillReusing(ids);
  return sessions.map((session, i) => {
    if (i > 0) {
      session.setSampling(settings(i));
      session.forkFrom(sessions[0]);
    }
    const sequence = { tokens: [], text: '', score: 0, stopReason: null };
    sequences.push(sequence);
    return { index: i, session, sequence, token: i === 0 ? first : session.sample(), decoder: tokenizer.createDecoder(), filter: new StopStringFilter(options.stop) };
  });
}
