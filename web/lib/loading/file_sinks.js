// Where the bytes of a model file go as they arrive: into memory (the text files) or into the engine's loader
// (model.safetensors, or a GGUF file). A sink: { write(chunk), length, finish() -> result, discard() }.
import { ModelLoadError } from '../errors.js';
import { engineCall } from './load_errors.js';
import { MODEL_FILES } from './model_files.js';

// The most bytes each text file can need; a larger one is refused from its announced size, before anything is
// read, or else as soon as its bytes pass the bound, since it is held whole in memory and parsed. GPT-2's
// config.json is 665 bytes: 1 MiB leaves room for every key a Hub config carries. GPT-2's vocab.json is 1.0 MB
// (50,257 tokens) and its merges.txt 0.46 MB (50,000 merges): 64 MiB holds a million tokens or merges (the most
// a GGUF file may hold, and tokenizer.js's bound on merges) of 64 bytes each.
const TEXT_FILE_BOUNDS = {
  [MODEL_FILES.config]: { mebibytes: 1, what: `a ${MODEL_FILES.config}`, hint: `not a ${MODEL_FILES.config}?` },
  [MODEL_FILES.vocab]: { mebibytes: 64, what: 'a tokenizer file', hint: `not a ${MODEL_FILES.vocab}?` },
  [MODEL_FILES.merges]: { mebibytes: 64, what: 'a tokenizer file', hint: `not a ${MODEL_FILES.merges}?` },
};
// A File given under another name (loadModelIntoEngine({ vocab: file })) gets the largest bound.
const OTHER_TEXT_FILE_BOUND = { mebibytes: 64, what: 'a text file of a model', hint: 'the wrong file?' };

// -> { bytes, limit } for a model's text file: the most bytes it may have, and the words saying so; null for
// the weights, which are never held whole.
export function textFileByteBound(name) {
  const bound = TEXT_FILE_BOUNDS[name];
  return bound ? describeBound(bound) : null;
}

function describeBound({ mebibytes, what, hint }) {
  return { bytes: mebibytes * 2 ** 20, limit: `${what} is at most ${mebibytes} MiB (${hint})` };
}

// Holds a text file (config.json, vocab.json or merges.txt) whole in memory; finish() -> its bytes.
export class BytesSink {
  #name;
  #bound;  // { bytes, limit }
  #parts = [];
  length = 0;

  // total: the size announced (File size, Content-Length), or null.
  constructor(name, total) {
    this.#name = name;
    this.#bound = describeBound(TEXT_FILE_BOUNDS[name] ?? OTHER_TEXT_FILE_BOUND);
    if (total === 0) throw new ModelLoadError(name, 'invalid', 'the file is empty');
    if (total > this.#bound.bytes) throw this.#tooLarge(`is ${total} bytes`);
  }

  write(chunk) {
    if (this.length + chunk.byteLength > this.#bound.bytes) throw this.#tooLarge(`is over ${this.#bound.bytes / 2 ** 20} MiB`);
    this.#parts.push(new Uint8Array(chunk));  // a copy: a source may reuse its buffer for the next chunk (nodeChunks does)
    this.length += chunk.byteLength;
  }

  finish() {
    const bytes = new Uint8Array(this.length);
    let offset = 0;
    for (const part of this.#parts) {
      bytes.set(part, offset);
      offset += part.byteLength;
    }
    this.#parts = [];
    return bytes;
  }

  discard() {
    this.#parts = [];
  }

  #tooLarge(size) {
    return new ModelLoadError(this.#name, 'invalid', `${size}; ${this.#bound.limit}`);
  }
}

// Feeds model.safetensors or a GGUF file to the engine's loader as it arrives; finish() makes the model. The
// engine checks the file, header first. Without fileSize: a Content-Length may be wrong (a cut or lying
// server), which must stay a network error (see readModelFile), not become a header that disagrees with the
// file; the engine checks the tensors' extent against the bytes that arrived when the file ends.
export class WeightsSink {
  #loader;
  #ggufName;
  length = 0;

  // createLoader() -> the engine's loader; ggufName: a GGUF file's name, which its errors then carry.
  constructor(createLoader, ggufName) {
    this.#ggufName = ggufName;
    this.#loader = engineCall(createLoader, ggufName);
  }

  // model.safetensors (WasmEngine.createModelLoader; format: 'fp32' or 'int8'). onMatrixRows: where the matrices go
  // (EngineModelLoader), or null.
  static safetensors(engine, configJson, format, onMatrixRows = null) {
    return new WeightsSink(() => engine.createModelLoader(configJson, { weights: format, onMatrixRows }));
  }

  // A GGUF file (WasmEngine.createGgufLoader), named fileName in errors.
  static gguf(engine, fileName, onMatrixRows = null) {
    return new WeightsSink(() => engine.createGgufLoader({ onMatrixRows }), fileName);
  }

  write(chunk) {
    this.length += chunk.byteLength;
    engineCall(() => this.#loader.feed(chunk), this.#ggufName);
  }

  finish() {
    try {
      return engineCall(() => this.#loader.finish(), this.#ggufName);
    } finally {
      this.#loader.dispose();
    }
  }

  discard() {
    this.#loader.dispose();
  }
}
