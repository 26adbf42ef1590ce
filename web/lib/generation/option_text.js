// The text form of generate()'s options: numbers (decimal only), logitBias, badWords, earlyStopping, and an
// attribute's boolean. The command line (--top-k, --logit-bias, …), the widget's data-* attributes (data-top-k,
// data-logit-bias, …) and the page's fields all read this one syntax through the options' table
// (option_table.js), so a value copied from one works in the others. Only the syntax is checked here; what the
// values may be (a token id within the vocabulary, …) is generate()'s check. Plain ES module.

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
// A bias is one, or -inf / -Infinity, which bans the token. +inf is not one: generate() takes finite biases and
// -Infinity only.
const BAN = /^-inf(inity)?$/i;

// A number as these texts write it: decimal only ("0x10", "1e" and "" are not numbers here, NaN).
export const parseNumber = (text) => (DECIMAL.test(text) ? Number(text) : NaN);

// An HTML attribute's boolean: "" (the attribute alone) and "true" are true, "false" is false; anything else
// ("no", "1", or a mistake) as it is, for its reader's check to name.
export const parseBoolean = (text) => ({ '': true, true: true, false: false })[text] ?? text;

// "true", "false" -> the boolean; anything else ("never", or a mistake) as it is, for generate()'s check to name.
export const parseEarlyStopping = (text) => ({ true: true, false: false })[text] ?? text;

// "50256:-inf, 13:2.5" -> { 50256: -Infinity, 13: 2.5 }: comma-separated TOKEN:BIAS entries, spaces allowed around
// each part, empty entries (a trailing comma) skipped; "" -> {}. A malformed entry, or a token given twice (which
// of the two biases was meant?), throws a RangeError that begins with name: the option as its reader calls it.
export function parseLogitBias(text, name = 'logitBias') {
  const bias = {};
  for (const entry of String(text).split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const match = /^(\d+)\s*:\s*(\S+)$/.exec(entry);
    if (!match || !(DECIMAL.test(match[2]) || BAN.test(match[2]))) {
      throw new RangeError(`${name}: ${JSON.stringify(entry)} is not TOKEN:BIAS`);
    }
    const token = Number(match[1]);
    if (Object.hasOwn(bias, token)) throw new RangeError(`${name}: token ${token} is given twice`);
    bias[token] = BAN.test(match[2]) ? -Infinity : Number(match[2]);
  }
  return bias;
}

// "thou, thee," -> ['thou', 'thee']: comma-separated texts, trimmed (generate() bans each with and without a
// leading space), empty ones dropped; "" -> []. A text with a comma in it can only be given to generate() itself.
export function parseBadWords(text) {
  return String(text).split(',').map((word) => word.trim()).filter((word) => word !== '');
}
