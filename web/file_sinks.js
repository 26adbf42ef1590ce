// Where the bytes of a model file go as they arrive: into memory (the text files) or into the engine's loader
// (model.safetensors, or a GGUF file). A sink: { write(chunk), length, finish() -> result, discard() }.
import { ModelLoadError, engineCall } from './load_errors.js';

export class BytesSink {
  #parts = [];
  length = 0;

  constructor(name, total) {
    if (total === 0) throw new ModelLoadError(name, 'invalid', 'the file is empty');
  }

  write(chunk) {
    this.#parts.push(chunk);
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

  // model.safetensors (WasmEngine.createModelLoader; format: 'fp32' or 'int8').
  static safetensors(engine, configJson, format) {
    return new WeightsSink(() => engine.createModelLoader(configJson, { weights: format }));
  }

  // A GGUF file (WasmEngine.createGgufLoader), named fileName in errors.
  static gguf(engine, fileName) {
    return new WeightsSink(() => engine.createGgufLoader(), fileName);
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
