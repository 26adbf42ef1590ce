// A copy of the bundled model whose tokenizer spells chosen tokens as any text a test needs (markup, terminal
// escapes), for the tests of how the page, the widget and the CLI show a model's tokens: a downloaded model's
// vocabulary is data from a stranger. The weights, and so the ids the model generates, are the bundled model's;
// merges.txt keeps only its header, so a prompt is read byte by byte and no merge names a renamed token.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tokenSpelling } from './encoder_reference.js';
import { generateInNode } from './node_generation.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const FIRST_MERGED_ID = 256;  // ids below are the byte tokens, which must keep their spelling
const END_OF_TEXT = '<|endoftext|>';

// Writes the model into folder. The greedy continuation of prompt (maxNewTokens tokens) decodes, in the copy,
// to texts[0], texts[1], … at the first generated tokens that are neither bytes nor end-of-text nor repeated.
// -> { options: the generate() options of that continuation, text: the continuation's text in the copy }
export async function writeModelWithRenamedTokens(folder, prompt, texts, maxNewTokens = 40) {
  mkdirSync(folder, { recursive: true });
  for (const name of ['config.json', 'model.safetensors']) copyFileSync(join(BUNDLED, name), join(folder, name));
  writeFileSync(join(folder, 'merges.txt'), '#version: 0.2\n');
  const vocab = JSON.parse(readFileSync(join(BUNDLED, 'vocab.json'), 'utf8'));
  writeFileSync(join(folder, 'vocab.json'), JSON.stringify(vocab));
  const options = { temperature: 0, maxNewTokens, stopAtEndOfText: false };

  const ids = [...new Set((await continuation(folder, prompt, options)).tokens)]
    .filter((id) => id >= FIRST_MERGED_ID && id !== vocab[END_OF_TEXT]);
  if (ids.length < texts.length) throw new Error(`only ${ids.length} tokens to rename, ${texts.length} texts`);
  const spellings = Object.fromEntries(Object.entries(vocab).map(([token, id]) => [id, token]));
  texts.forEach((text, i) => {
    delete vocab[spellings[ids[i]]];
    vocab[tokenSpelling(text)] = ids[i];
  });
  writeFileSync(join(folder, 'vocab.json'), JSON.stringify(vocab));
  return { options, text: (await continuation(folder, prompt, options)).text };
}

const continuation = (folder, prompt, options) => generateInNode(`${folder}/`, prompt, options);
