// The verification half of gpt2tools.convert.export_onnx: runs an exported decoder with onnxruntime-web and writes the
// last-token logits of each call as little-endian float32 [calls, n_vocab]: the first N_PREFILL ids in one
// call, then every later id alone against the returned cache.
//
//   node tools/bench/ort_logits.mjs MODEL_DIR DECODER.onnx N_PREFILL 464,2068,7586,... OUT.f32
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createOrtDecoder } from './ort_decoder.mjs';

const [modelDir, onnxPath, prefillText, idsText, outPath] = process.argv.slice(2);
if (!outPath) throw new Error('usage: node tools/bench/ort_logits.mjs MODEL_DIR DECODER.onnx N_PREFILL IDS OUT.f32');
const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
const ids = idsText.split(',').map(Number);
const nPrefill = Number(prefillText);
const decoder = await createOrtDecoder(onnxPath, config);
const rows = [await decoder.prefill(ids.slice(0, nPrefill))];
for (const id of ids.slice(nPrefill)) rows.push(await decoder.step(id));
await decoder.release();
const out = new Float32Array(rows.length * config.vocab_size);
rows.forEach((row, i) => out.set(row, i * config.vocab_size));
writeFileSync(outPath, new Uint8Array(out.buffer));
