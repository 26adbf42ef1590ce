// The models the page offers: the bundled one, the Hub's folders and GGUF files, a folder or file given as
// ?model=, and local files.
import { resolveAgainstPage } from '../lib/environment.js';
import { hubFileUrl, modelLocation } from '../lib/loading/model_files.js';
import { state } from './page_state.js';

// The bundled model comes twice: first (the default) as one Q4_0 GGUF file, a third of the download of its
// safetensors folder for a held-out loss within 0.01 of fp32 (public/models/tiny-shakespeare/README.md); then
// as that folder, which the Weights setting applies to. Download sizes of the others are those of
// model.safetensors on the Hugging Face Hub (float32 weights). int8Only: the fp32 weights (3.1 and 6.2 GB)
// exceed what one WebAssembly allocation can hold (2 GB), so the model always loads quantized (0.8 and 1.6 GB).
export const MODEL_CHOICES = [
  { value: 'tiny-shakespeare', label: 'Tiny Shakespeare (bundled, offline)', source: 'models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', gguf: true },
  { value: 'tiny-shakespeare-safetensors', label: 'Tiny Shakespeare, safetensors (bundled, fp32 or int8)', source: 'models/tiny-shakespeare/' },
  { value: 'gpt2', label: 'GPT-2 124M', size: '548 MB', source: hubFileUrl('openai-community/gpt2') },
  { value: 'gpt2-medium', label: 'GPT-2 355M', size: '1.5 GB', source: hubFileUrl('openai-community/gpt2-medium') },
  { value: 'gpt2-large', label: 'GPT-2 774M', size: '3.2 GB', source: hubFileUrl('openai-community/gpt2-large'), int8Only: true },
  { value: 'gpt2-xl', label: 'GPT-2 1.5B', size: '6.4 GB', source: hubFileUrl('openai-community/gpt2-xl'), int8Only: true },
  { value: 'distilgpt2', label: 'DistilGPT2', size: '353 MB', source: hubFileUrl('distilbert/distilgpt2') },
];

// GGUF files on the Hub, one file each, run in their own (quantized) types; sizes as the Hub lists them. Only
// files whose types the engine runs (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): the Hub's Q2_K
// and Q3_K variants are left out.
const GGUF_REPOSITORY = 'QuantFactory/gpt2-GGUF';

export const GGUF_CHOICES = [
  ['Q8_0', '178 MB'], ['Q6_K', '138 MB'], ['Q5_1', '130 MB'], ['Q5_K_M', '127 MB'], ['Q5_0', '122 MB'],
  ['Q5_K_S', '122 MB'], ['Q4_1', '114 MB'], ['Q4_K_M', '113 MB'], ['Q4_0', '107 MB'], ['Q4_K_S', '107 MB'],
].map(([type, size]) => ggufChoice('GPT-2 124M', GGUF_REPOSITORY, `gpt2.${type}.gguf`, size)).concat([
  ggufChoice('GPT-2 355M', 'mradermacher/gpt2-medium-GGUF', 'gpt2-medium.Q4_K_M.gguf', '271 MB'),
  ggufChoice('GPT-2 1.5B', 'mradermacher/gpt2-xl-GGUF', 'gpt2-xl.Q4_K_M.gguf', '1.19 GB'),
]);

function ggufChoice(model, repository, file, size) {
  return { value: `gguf:${repository}/${file}`, label: `${model} · ${file}`, size, source: hubFileUrl(repository, file), gguf: true };
}

export const LOCAL_FILES_VALUE = 'local-files';

export const LOADED_LOCAL_VALUE = 'loaded-local';

const URL_PARAMETER_VALUE = 'url-parameter';

// `?model=<URL>` preselects a model folder, or a GGUF file (a path ending in .gguf), absolute or relative to
// this page.
export function choiceFromUrlParameter() {
  const address = new URLSearchParams(location.search).get('model');
  if (!address) return null;
  let named;
  try {
    named = modelLocation(resolveAgainstPage(address));
  } catch {
    throw new Error(`The model address in this page's URL is not a valid URL: ${address}`);
  }
  const { url, gguf } = named;
  return { value: URL_PARAMETER_VALUE, label: `Model at ${url.href}`, source: url.href, gguf };
}

export function findChoice(value) {
  return [...MODEL_CHOICES, ...GGUF_CHOICES, state.urlChoice, state.localChoice].find((choice) => choice?.value === value);
}
