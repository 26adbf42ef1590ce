// The files of a model folder in the Hugging Face layout.
export const MODEL_FILES = Object.freeze({
  config: 'config.json',
  weights: 'model.safetensors',
  vocab: 'vocab.json',
  merges: 'merges.txt',
});
