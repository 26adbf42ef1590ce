// generate()'s numBeams > 1 (runBeams): beam search and beam sampling. Plain ES module.
import { yieldToEventLoop } from './event_loop.js';
import { pairs, tokenText } from './pieces.js';
import { promptIds } from './prompt.js';
import { updateContextStats } from './run_stats.js';
import { samplingSettings } from './sampling_settings.js';
import { scoreInPasses } from './score.js';
import { acquireSessions } from './session_pool.js';
import { StopStringFilter } from './stop_strings.js';

// Beam search with Hugging Face's semantics (engine/gpt2.h BeamSearch): deterministic at temperature 0, beam
// sampling above it (the warpers and the seed apply). numBeams sessions hold one beam each and are fed together,
// one batched pass per step. A beam's text can change until the search ends, so the text comes then: the first
// numReturnSequences hypotheses, best first, each through its own stop-string filter, with `sequence: i` on its
// pieces when there are several. With topAlternatives, each piece's probability and alternatives are the model's
// (scoreTokens: one score of the hypothesis after at most a context of the prompt). Stop (the signal) ends the
// search with the running beams as hypotheses; during the scoring, it leaves the hypotheses not scored yet without
// probabilities. sequences receives { tokens, text, score (the hypothesis's: sum of log-probabilities / length ^
// lengthPenalty), stopReason } per returned hypothesis, best first.
export async function* runBeams({ pool, tokenizer, config }, prompt, options, stats, sequences) {
  const sessions = [];
  let search = null;  // the engine's beam search (EngineBeamSearch), until its results are read
  let keepLeader = true;
  try {
    acquireSessions(pool, options, options.numBeams, sessions, { method: 'beamSearch', option: 'numBeams' });
    const ids = promptIds(tokenizer, prompt);
    stats.promptTokens = ids.length;
    const settings = samplingSettings(options, tokenizer);
    for (const session of sessions) session.setSampling(settings);
    const started = performance.now();
    const { numBeams, lengthPenalty, earlyStopping, maxNewTokens } = options;
    const eosToken = options.stopAtEndOfText ? tokenizer.eosId : -1;
    search = sessions[0].beamSearch(sessions, { numBeams, lengthPenalty, earlyStopping, maxNewTokens, eosToken }, ids);
    stats.reusedTokens = sessions[0].reusedTokens;
    stats.prefillMs = performance.now() - started;
    const { hypotheses, msPerStep, aborted: searchAborted } = await runSearch(search, numBeams, options, stats);
    search.dispose();
    search = null;
    const returned = hypotheses.slice(0, options.numReturnSequences);
    const scored = [];
    let aborted = searchAborted;
    try {
      for (let i = returned.length - 1; i >= 0; i--) scored[i] = await scoreTokens(sessions[0], ids, returned[i].tokens, options, config.n_ctx);
    } catch (error) {
      if (error?.name !== 'AbortError') throw error;
      // stopped mid-score: the session's score run is unfinished, its buffers allocated; it is freed, not kept
      aborted = true;
      keepLeader = false;
    }
    // The first session, which the pool keeps, is left holding the best sequence (the last one scored), for a
    // Continue to reuse.
    if (keepLeader && !scored[0]) sessions[0].feedPrompt([...ids, ...(returned[0]?.tokens ?? [])], true);
    for (const [i, hypothesis] of returned.entries()) {
      const sequence = { tokens: [], text: '', score: hypothesis.score, stopReason: null };
      sequences.push(sequence);
      yield* emitHypothesis(tokenizer, ids, hypothesis, scored[i], { index: i, tagged: returned.length > 1, msPerStep, aborted }, sequence, options);
      stats.generatedTokens += sequence.tokens.length;
    }
    updateContextStats(stats, sessions[0]);
    stats.stopReason = sequences[0]?.stopReason ?? (aborted ? 'abort' : 'length');
  } catch (error) {
    stats.stopReason = 'error';
    throw error;
  } finally {
    stats.stopReason ??= 'abort';
    search?.dispose();
    if (!keepLeader) pool.discard(sessions.shift());
    for (const session of sessions.reverse()) pool.release(session, options);
  }
}

// Runs the search's steps, a turn of the event loop between them -> { hypotheses, msPerStep, aborted }.
async function runSearch(search, numBeams, options, stats) {
  let steps = 0;
  let decodeMs = 0;
  let aborted = false;
  for (let running = true; running;) {
    await yieldToEventLoop();
    if (options.signal?.aborted) {
      search.finish();
      aborted = true;
      break;
    }
    const started = performance.now();
    running = search.step();
    decodeMs += performance.now() - started;
    steps++;
    // every step feeds each beam one token (the last one feeds none)
    stats.decodeTokensPerSecond = (steps * numBeams * 1000) / decodeMs;
  }
  return { hypotheses: search.results(), msPerStep: steps > 0 ? decodeMs / steps : 0, aborted };
}

// With topAlternatives: the model's log-probability and alternatives of each of tokens after the prompt ids, as
// score() gives them for the prompt's newest n_ctx - 1 ids followed by tokens; else null. A prompt shorter than
// the context is scored whole (each token given all the tokens before it, as long as prompt and hypothesis fit
// the context); a longer one gives the first token the n_ctx - 1 ids before it, the most a window holds, and each
// later token, in score()'s windows, at least n_ctx/2. So a long prompt costs one context, not its length.
// -> { logprobs, alternatives } with row j for tokens[j]; rejects with the AbortError when options.signal aborts.
async function scoreTokens(session, ids, tokens, options, contextSize) {
  if (options.topAlternatives === 0 || tokens.length === 0) return null;
  const context = ids.slice(Math.max(0, ids.length - (contextSize - 1)));
  const topK = Math.min(options.topAlternatives, session.vocabSize);
  // score() scores ids[1..]: row r is the id r + 1, so tokens[0] (the id context.length) is row context.length - 1
  const { logprobs, alternatives } = await scoreInPasses(session, [...context, ...tokens], topK, options.signal);
  return { logprobs: logprobs.slice(context.length - 1), alternatives: alternatives.slice(context.length - 1) };
}

// A hypothesis's pieces through a stop-string filter, filling sequence; scores: scoreTokens' result or null.
function* emitHypothesis(tokenizer, ids, hypothesis, scores, { index, tagged, msPerStep, aborted }, sequence, options) {
  const decoder = tokenizer.createDecoder();
  const filter = new StopStringFilter(options.stop);
  const emit = (piece) => {
    sequence.text += piece.text;
    return tagged ? { ...piece, sequence: index } : piece;
  };
  let stopped = false;
  for (const [j, token] of hypothesis.tokens.entries()) {
    sequence.tokens.push(token);
    const piece = { text: token < tokenizer.vocabSize ? decoder.push(token) : '', token, position: ids.length + j, ms: msPerStep };
    if (scores) {
      piece.probability = Math.exp(scores.logprobs[j]);
      piece.alternatives = pairs(scores.alternatives[j]).map(([id, logprob]) => ({ token: id, text: tokenText(tokenizer, id), probability: Math.exp(logprob) }));
    }
    const result = filter.push(piece);
    for (const released of result.pieces) yield emit(released);
    if ((stopped = result.stopped)) break;
  }
  if (!stopped) for (const piece of filter.finish(decoder.flush())) yield emit(piece);
  sequence.stopReason = stopped ? 'stop' : aborted ? 'abort' : hypothesis.endedByEos ? 'eos' : 'length';
}
