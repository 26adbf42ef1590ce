// generate()'s options as the engine's sampler takes them (EngineSession.setSampling, engine/gpt2.h
// SamplingSettings). Plain ES module.
import { GENERATE_OPTIONS } from './option_table.js';

// The options that cross into the engine's SamplingSettings (the table's `engine` entries), and the seed.
const ENGINE_OPTIONS = [...Object.keys(GENERATE_OPTIONS).filter((name) => GENERATE_OPTIONS[name].engine), 'seed'];

// options as normalizeGenerateOptions returns them -> the sampler's settings: badWords as token ids, and the
// end-of-text token that minNewTokens holds back.
export function samplingSettings(options, tokenizer) {
  const settings = Object.fromEntries(ENGINE_OPTIONS.map((name) => [name, options[name]]));
  return { ...settings, badWords: badWordIds(options.badWords, tokenizer), eosToken: tokenizer.eosId };
}

// badWords as the engine takes them: each text as its tokens, and again with a leading space (how a word
// mid-sentence is encoded); id sequences as they are.
function badWordIds(badWords, tokenizer) {
  return badWords.flatMap((word) => (typeof word === 'string' ? [tokenizer.encode(word), tokenizer.encode(` ${word}`)] : [word]));
}
