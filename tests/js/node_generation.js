// One generation through the repository's API in this Node process: the reference text that the tests of other
// ways to run the engine (the CLI, the installed package, the page) compare with.
import { loadModel } from '../../web/lib/gpt2.js';

// -> { tokens, text } of model.generate(prompt, options) with the model at source (loadModel's loadOptions)
export async function generateInNode(source, prompt, options, loadOptions = {}) {
  const model = await loadModel(source, loadOptions);
  try {
    const tokens = [];
    let text = '';
    for await (const piece of model.generate(prompt, options)) {
      tokens.push(piece.token);
      text += piece.text;
    }
    return { tokens, text };
  } finally {
    model.dispose();
  }
}
