// model.inspect() in this thread: the input's tokens (its newest n_ctx, the window) fed in one fresh pass of a
// session of their own, the positions asked for inspected (engine/inspection/inspector.h), so that what it shows
// is what a prefill of that window computes. Plain ES module.
import { inspectionRequest } from '../generation/option_checks.js';
import { tokenText } from '../generation/pieces.js';
import { checkPrompt, promptIds } from '../generation/prompt.js';
import { readInspection } from './inspection_result.js';

// engineModel: the EngineModel whose session runs it (a GPU model's CPU twin: device says which model was asked);
// options: as normalizeInspectOptions returns them.
export async function inspectInput({ engineModel, tokenizer, config, device }, input, options) {
  checkPrompt(input, 'inspect', 'input');
  const ids = promptIds(tokenizer, input);
  const window = ids.length > config.n_ctx ? ids.slice(ids.length - config.n_ctx) : ids;
  const request = inspectionRequest(options, config, window.length);
  const session = engineModel.createSession({ useKVCache: true, kvCache: options.kvCache });
  try {
    session.setSampling({ temperature: 0 });
    session.inspect(request);
    session.inspectPrompt(window, false);
    const inspection = readInspection(session.inspection(), request, { config, tokenizer, kvCache: options.kvCache });
    return {
      tokens: Array.from(window, (id) => ({ id, text: tokenText(tokenizer, id) })),
      ...inspection,
      ...ranOn(device),
    };
  } finally {
    session.dispose();
  }
}

// Where an inspection ran, for a model on device: the engine's CPU passes, which a GPU's do not expose.
export function ranOn(device) {
  return device === 'webgpu'
    ? { device: 'wasm', note: "a GPU pass gives logits only: this inspection ran the model's weights on the CPU engine" }
    : { device: 'wasm' };
}
