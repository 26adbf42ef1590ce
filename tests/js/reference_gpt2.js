// A float64 GPT-2 straight from a safetensors file's Hugging Face tensors (Conv1D weights [in][out]), written from
// the model's math and sharing no code with the engine, for the tests that hold the API's log-probabilities
// against it (tests/cpp/reference_gpt2.h is its C++ twin for the native tests).
import { readFileSync } from 'node:fs';

// IEEE half precision -> number
function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

// name -> Float64Array, from F32, F16 or BF16 tensors
function readTensors(path) {
  const file = readFileSync(path);
  const headerLength = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + headerLength).toString('utf8'));
  const tensors = new Map();
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const { dtype, data_offsets: [begin, end] } = entry;
    const bytes = file.subarray(8 + headerLength + begin, 8 + headerLength + end);
    const size = dtype === 'F32' ? 4 : 2;
    const values = new Float64Array(bytes.length / size);
    for (let i = 0; i < values.length; i++) {
      if (dtype === 'F32') values[i] = bytes.readFloatLE(4 * i);
      else if (dtype === 'F16') values[i] = halfToNumber(bytes.readUInt16LE(2 * i));
      else if (dtype === 'BF16') values[i] = new Float32Array(new Uint32Array([bytes.readUInt16LE(2 * i) << 16]).buffer)[0];
      else throw new Error(`reference: unsupported dtype ${dtype}`);
    }
    tensors.set(name, values);
  }
  return tensors;
}

export class ReferenceGpt2 {
  #p;
  #config;

  // folder: config.json and model.safetensors
  constructor(folder) {
    this.#config = JSON.parse(readFileSync(`${folder}config.json`, 'utf8'));
    this.#p = readTensors(`${folder}model.safetensors`);
  }

  // -> the log-softmax of the logits at each position: an array of n Float64Arrays of n_vocab. inside, when given,
  // receives the intermediates the inspection tests compare with: attention[layer * n_head + head] (n, n: row t holds
  // t + 1 probabilities) and residual[layer] (n, n_embd), the stream after the layer.
  logprobs(ids, inside = null) {
    const { n_embd: C, n_head: H, n_layer: L } = this.#config;
    const hs = C / H;
    const n = ids.length;
    const wte = this.#param('wte.weight');
    const wpe = this.#param('wpe.weight');
    let x = new Float64Array(n * C);
    for (let t = 0; t < n; t++) for (let i = 0; i < C; i++) x[t * C + i] = wte[ids[t] * C + i] + wpe[t * C + i];
    for (let l = 0; l < L; l++) {
      const h = `h.${l}.`;
      const a = this.#linear(this.#layerNorm(x, `${h}ln_1`), `${h}attn.c_attn`, C, 3 * C);
      const attention = new Float64Array(n * C);
      for (let head = 0; head < H; head++) {
        const probabilities = new Float64Array(n * n);
        for (let t = 0; t < n; t++) {
          const w = new Float64Array(t + 1);
          let max = -Infinity;
          for (let j = 0; j <= t; j++) {
            let d = 0;
            for (let i = 0; i < hs; i++) d += a[t * 3 * C + head * hs + i] * a[j * 3 * C + C + head * hs + i];
            w[j] = d / Math.sqrt(hs);
            max = Math.max(max, w[j]);
          }
          let sum = 0;
          for (let j = 0; j <= t; j++) sum += (w[j] = Math.exp(w[j] - max));
          for (let j = 0; j <= t; j++) {
            probabilities[t * n + j] = w[j] / sum;
            for (let i = 0; i < hs; i++) attention[t * C + head * hs + i] += (w[j] / sum) * a[j * 3 * C + 2 * C + head * hs + i];
          }
        }
        inside?.attention.push(probabilities);
      }
      x = added(x, this.#linear(attention, `${h}attn.c_proj`, C, C));
      const f = this.#linear(this.#layerNorm(x, `${h}ln_2`), `${h}mlp.c_fc`, C, 4 * C);
      for (let i = 0; i < f.length; i++) f[i] = 0.5 * f[i] * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (f[i] + 0.044715 * f[i] ** 3)));
      x = added(x, this.#linear(f, `${h}mlp.c_proj`, 4 * C, C));
      inside?.residual.push(x);
    }
    return this.headLogprobs(x);
  }

  // The final layernorm and the LM head (tied wte) on residual rows (n, n_embd) -> their log-softmax rows.
  headLogprobs(x) {
    const { n_embd: C, vocab_size: V } = this.#config;
    const n = x.length / C;
    const wte = this.#param('wte.weight');
    const xf = this.#layerNorm(x, 'ln_f');
    const rows = [];
    for (let t = 0; t < n; t++) {
      const logits = new Float64Array(V);
      let max = -Infinity;
      for (let v = 0; v < V; v++) {
        let d = 0;
        for (let i = 0; i < C; i++) d += xf[t * C + i] * wte[v * C + i];
        logits[v] = d;
        max = Math.max(max, d);
      }
      let sum = 0;
      for (let v = 0; v < V; v++) sum += Math.exp(logits[v] - max);
      const logSum = max + Math.log(sum);
      for (let v = 0; v < V; v++) logits[v] -= logSum;
      rows.push(logits);
    }
    return rows;
  }

  #param(name) {
    const value = this.#p.get(name);
    if (!value) throw new Error(`reference: no tensor ${name}`);
    return value;
  }

  #layerNorm(x, name) {
    const C = this.#config.n_embd;
    const epsilon = this.#config.layer_norm_epsilon ?? 1e-5;
    const [weight, bias] = [this.#param(`${name}.weight`), this.#param(`${name}.bias`)];
    const out = new Float64Array(x.length);
    for (let t = 0; t < x.length / C; t++) {
      let mean = 0;
      let variance = 0;
      for (let i = 0; i < C; i++) mean += x[t * C + i] / C;
      for (let i = 0; i < C; i++) variance += (x[t * C + i] - mean) ** 2 / C;
      for (let i = 0; i < C; i++) out[t * C + i] = ((x[t * C + i] - mean) / Math.sqrt(variance + epsilon)) * weight[i] + bias[i];
    }
    return out;
  }

  #linear(x, name, nIn, nOut) {
    const [w, b] = [this.#param(`${name}.weight`), this.#param(`${name}.bias`)];
    const out = new Float64Array((x.length / nIn) * nOut);
    for (let t = 0; t < x.length / nIn; t++) {
      for (let o = 0; o < nOut; o++) {
        let d = b[o];
        for (let i = 0; i < nIn; i++) d += x[t * nIn + i] * w[i * nOut + o];
        out[t * nOut + o] = d;
      }
    }
    return out;
  }
}

function added(x, y) {
  return x.map((value, i) => value + y[i]);
}
