// The errors of loading a model: the mapping of the engine's errors onto ModelLoadError (errors.js) by their
// kind, the check for a web page served instead of a file, and an error's message with its cause.
import { ModelLoadError } from '../errors.js';
import { ENGINE_GGUF_NAME, MODEL_FILES } from './model_files.js';

// The file each kind of engine error is about.
const ENGINE_ERROR_FILES = { config: MODEL_FILES.config, file: MODEL_FILES.weights };

// Runs fn, turning the engine's errors into load errors by their kind: a config or file error is the file's
// fault (ModelLoadError 'invalid'; the engine's message already names the file); out of memory is not (a plain
// Error, and nothing is evicted from the cache). ggufName: the GGUF file being loaded, if any, whose name
// replaces the "model.gguf" that the engine's messages start with.
export function engineCall(fn, ggufName) {
  try {
    return fn();
  } catch (error) {
    if (error.name !== 'EngineError') throw error;
    if (error.kind === 'memory') {
      throw new Error(`${error.message} (the WebAssembly heap holds 4 GB at most, and one allocation 2 GB)`, { cause: error });
    }
    if (error.kind === 'file' && ggufName !== undefined) {
      const loadError = new ModelLoadError(ggufName, 'invalid', '', { cause: error });
      loadError.message = error.message.startsWith(`${ENGINE_GGUF_NAME}: `)
        ? `${ggufName}${error.message.slice(ENGINE_GGUF_NAME.length)}` : `${ggufName}: ${error.message}`;
      throw loadError;
    }
    const file = ENGINE_ERROR_FILES[error.kind];
    if (!file) throw error;  // 'input': a caller's mistake, not the files'
    const loadError = new ModelLoadError(file, 'invalid', '', { cause: error });
    loadError.message = error.kind === 'file' ? `${error.message} (a corrupt file, or not GPT-2 weights?)` : error.message;
    throw loadError;
  }
}

// The one check for a web page served instead of a model file (a wrong URL, or a login or error page with
// status 200): on the first bytes of every file, before JSON or the engine would report something less clear.
export function checkNotHtml(name, firstBytes) {
  let i = 0;
  while (i < firstBytes.length && (firstBytes[i] === 0x20 || firstBytes[i] === 0x0a || firstBytes[i] === 0x0d ||
    firstBytes[i] === 0x09 || firstBytes[i] === 0xef || firstBytes[i] === 0xbb || firstBytes[i] === 0xbf)) i++;
  if (firstBytes[i] === 0x3c /* '<' */) {
    throw new ModelLoadError(name, 'invalid',
      'got an HTML page instead of the file (wrong URL, or a login or error page served with status 200)');
  }
}

export function describe(error) {
  const cause = error?.cause?.message ?? error?.cause?.code;
  return cause ? `${error.message}: ${cause}` : String(error?.message ?? error);
}
