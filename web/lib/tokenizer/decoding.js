// decode(ids) and the streaming decoder of the tokenizer, from the vocabulary's flat token bytes
// (token_files.js parseVocab: tokenBytes[tokenStart[id] .. tokenStart[id] + tokenLength[id]]).

// -> { decode(ids) -> text, createDecoder() -> { push(id) -> text, flush() -> text } }
export function createDecoding({ tokenBytes, tokenStart, tokenLength, vocabSize }) {
  function checkId(id) {
    if (!(Number.isInteger(id) && id >= 0 && id < vocabSize)) {
      throw new Error(`decode: invalid token id ${String(id)} (not in the vocab of ${vocabSize} ids)`);
    }
  }

  // ignoreBOM keeps a leading U+FEFF in the text instead of silently stripping it.
  const fullDecoder = new TextDecoder('utf-8', { ignoreBOM: true });

  function decode(ids) {
    if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) throw new TypeError('decode: ids must be an array of token ids');
    let byteCount = 0;
    for (let i = 0; i < ids.length; i++) {
      checkId(ids[i]);
      byteCount += tokenLength[ids[i]];
    }
    const bytes = new Uint8Array(byteCount);
    let offset = 0;
    for (let i = 0; i < ids.length; i++) {
      const start = tokenStart[ids[i]];
      const end = start + tokenLength[ids[i]];
      for (let j = start; j < end; j++) bytes[offset++] = tokenBytes[j];
    }
    return fullDecoder.decode(bytes);
  }

  // A streaming TextDecoder holds back the bytes of an incomplete UTF-8 character until the token
  // that completes it arrives, so generated text never shows half a character.
  function createDecoder() {
    const streamDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
    return {
      push(id) {
        checkId(id);
        return streamDecoder.decode(tokenBytes.subarray(tokenStart[id], tokenStart[id] + tokenLength[id]), { stream: true });
      },
      flush: () => streamDecoder.decode(),
    };
  }

  return { decode, createDecoder };
}
