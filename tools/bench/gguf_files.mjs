// The GGUF files the benchmark measures: one per --weights type, converted on demand from a model's Hugging Face
// folder by gpt2tools.convert.convert_to_gguf into build/models/<folder>-gguf/gpt2-<model>-<type>.gguf (only the
// types a run asks for, once), and what one decode step reads from each (tools/bench/gguf_decode_bytes.py).
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { runPython } from './python_tools.mjs';

// convert_to_gguf's --type values. q4_k_m is llama-quantize's mixture (Q4_K with Q6_K rows); the others put
// every matrix in their type (the legacy ones with token_embd in Q6_K, as llama-quantize does).
export const GGUF_TYPES = ['f32', 'f16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k_m', 'q4_k', 'q5_k', 'q6_k'];

export const isGguf = (weights) => GGUF_TYPES.includes(weights);

// repo: the repository root; modelDir: the model's folder; model: its --models name -> the file's path.
export function ggufPath(repo, modelDir, model, type) {
  return join(repo, 'build/models', `${basename(modelDir)}-gguf`, `gpt2-${model}-${type}.gguf`);
}

// The file, converted first when it is missing. log(text) reports the conversion.
export function ensureGguf(repo, modelDir, model, type, log) {
  const file = ggufPath(repo, modelDir, model, type);
  if (existsSync(file)) return file;
  mkdirSync(dirname(file), { recursive: true });
  log(`${relative(repo, file)} is missing, converting (gpt2tools.convert.convert_to_gguf --type ${type})`);
  // Written under a temporary name first: an interrupted conversion leaves no file that looks complete.
  const partial = `${file}.partial`;
  runPython(['-m', 'gpt2tools.convert.convert_to_gguf', modelDir, '--type', type, '-o', partial, '--quiet'],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  renameSync(partial, file);
  return file;
}

// -> { fileBytes, decodeBytes, types: { ggml type: count of the matrices read per step } }
export function ggufDecodeBytes(repo, file) {
  const output = runPython([join(repo, 'tools/bench/gguf_decode_bytes.py'), file], { encoding: 'utf8' });
  const { decode_bytes: decodeBytes, types } = JSON.parse(output);
  return { fileBytes: statSync(file).size, decodeBytes, types };
}
