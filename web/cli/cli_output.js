// Where gpt2-wasm's text goes: standard output and error, as the raw text when they are piped (for the programs
// that read them) and with control characters shown escaped on a terminal. A model's tokens, file names and
// servers' messages come from outside, and a control character among them (ESC starting `\x1b]8;;…` or
// `\x1b[2J`, a carriage return, a C1 control) would drive the user's terminal: move the cursor, clear the screen,
// set the title, make links. Newline and tab are text and stay as they are.
const CONTROL_CHARACTERS = /(?![\n\t])\p{Cc}/gu;  // Cc: U+0000-U+001F, U+007F-U+009F

// text with each control character but newline and tab written as an escape: \r, \x1b, \u009b.
export function escapeControlCharacters(text) {
  return text.replace(CONTROL_CHARACTERS, (character) => {
    const code = character.charCodeAt(0);
    if (character === '\r') return '\\r';
    return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

// -> write(text) for stream: escaped when stream is a terminal, raw otherwise.
export function textWriter(stream) {
  return stream.isTTY ? (text) => stream.write(escapeControlCharacters(text)) : (text) => stream.write(text);
}
