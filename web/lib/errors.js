// The errors of the library: their classes (each caller may test instanceof or error.name) and the AbortError
// that a cancelled load or request rejects with.

// kind: 'network' (connection, CORS, interrupted download), 'http' (error status), 'missing' (no such local
// file) or 'invalid' (the bytes are not what the file should be: HTML page, corrupt JSON, bad safetensors or GGUF).
export class ModelLoadError extends Error {
  constructor(file, kind, message, options) {
    super(`${file}: ${message}`, options);
    this.name = 'ModelLoadError';
    this.file = file;
    this.kind = kind;
  }
}

// A cached copy that is not what was stored (truncated, or bytes changed): it is evicted when found out, alone,
// so that loading again downloads only that file.
export class DamagedCopyError extends ModelLoadError {
  constructor(name, message) {
    super(name, 'invalid', message);
  }
}

// reason: what the engine said when it aborted (e.g. out of memory). The engine worker's page side reloads its
// models after one (worker_client.js, which says so in the message); a model in this thread must be loaded again.
export class EngineAbortedError extends Error {
  constructor(reason, message = `the WebAssembly engine crashed (${reason}); reload the model`) {
    super(message);
    this.name = 'EngineAbortedError';
    this.reason = reason;
  }
}

// An engine call that failed: the engine's message, and its kind ('config': config.json is invalid, 'file':
// model.safetensors is, 'memory': an allocation failed, 'input': an argument is out of range).
export class EngineError extends Error {
  constructor({ kind, message }) {
    super(message);
    this.name = 'EngineError';
    this.kind = kind;
  }
}

// The error an aborted load (or other request) rejects with, as fetch's: a DOMException named AbortError.
export function abortError(message) {
  return new DOMException(message, 'AbortError');
}

// The AbortError of a load that was cancelled; what: the thing being loaded (a file's name, or the model).
export function loadAbortedError(what = 'the model') {
  return abortError(`loading ${what} was aborted`);
}

export function throwIfAborted(signal, what) {
  if (signal?.aborted) throw loadAbortedError(what);
}
