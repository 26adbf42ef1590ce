// The app's code: it imports the package by its name, and the bundler puts it and the package's modules into
// one main.js, so the engine's files cannot be found from the modules' URLs: configure({ assetBase }) names them.
import { configure, loadModel } from 'gpt2-wasm';

const query = new URLSearchParams(location.search);
const status = document.querySelector('#status');

async function generateGreedyText() {
  configure({ assetBase: query.get('assets') });
  const model = await loadModel(query.get('model'));
  let text = '';
  for await (const piece of model.generate(query.get('prompt'), { maxNewTokens: Number(query.get('tokens')), temperature: 0 })) {
    text += piece.text;
  }
  model.dispose();
  return text;
}

generateGreedyText().then((text) => {
  document.querySelector('#output').textContent = text;
  status.textContent = 'Done';
}, (error) => {
  status.textContent = `Failed: ${error.message}`;
});
