// OpenAI's encoder.py definitions that the tests compare web/lib/tokenizer.js against, written out here from the
// reference rather than taken from the code under test.

// bytes_to_unicode(): the character that spells each byte in vocab.json and merges.txt (printable Latin-1 bytes
// stand for themselves, the other 68 for U+0100 onwards).
export const BYTE_CHARACTERS = Object.freeze((() => {
  const characters = [];
  let nextCharCode = 256;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    characters.push(String.fromCharCode(printable ? byte : nextCharCode++));
  }
  return characters;
})());

// GPT-2's pre-tokenizer pattern.
export const GPT2_PIECES = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

// The vocab.json spelling of a token whose bytes are text's UTF-8.
export function tokenSpelling(text) {
  return Array.from(new TextEncoder().encode(text), (byte) => BYTE_CHARACTERS[byte]).join('');
}
