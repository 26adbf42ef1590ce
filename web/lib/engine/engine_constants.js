// The engine's constants (WasmEngine.constants, web/lib/engine/engine.js) for JS that runs before an engine
// exists. Written by tools/dev/write_engine_constants.mjs from the built engine: do not edit.
function deepFreeze(value) {
  if (value && typeof value === 'object') for (const inner of Object.values(Object.freeze(value))) deepFreeze(inner);
  return value;
}

export const LIMITS = deepFreeze({
  "maxSequences": 16,
  "maxDraftTokens": 16,
  "maxThreads": 16,
  "maxScoreAlternatives": 4194304,
  "maxInt": 2147483647,
  "maxFloat": 3.4028234663852886e+38,
  "maxInspectTopK": 64
});

export const ENUMS = deepFreeze({
  "errorKinds": [
    "",
    "config",
    "file",
    "memory",
    "input"
  ],
  "weightFormats": [
    "fp32",
    "int8",
    "f16",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q4_k",
    "q5_k",
    "q6_k"
  ],
  "kvCacheFormats": [
    "fp32",
    "int8"
  ],
  "earlyStopping": [
    "heuristic",
    "done",
    "never"
  ],
  "cacheEvents": [
    "cleared",
    "kept",
    "rolledBack",
    "slid",
    "written"
  ],
  "samplerStages": [
    "logits",
    "logitBias",
    "repetitionPenalty",
    "presenceFrequencyPenalty",
    "noRepeatNgramSize",
    "badWords",
    "minNewTokens",
    "greedy",
    "topK",
    "temperature",
    "topP",
    "minP",
    "typicalP",
    "distribution"
  ]
});

export const WEIGHT_NAMES = deepFreeze({
  "modelMatrices": [
    "wte",
    "lm_head"
  ],
  "layerMatrices": [
    "attn_qkv",
    "attn_proj",
    "mlp_fc",
    "mlp_proj"
  ],
  "modelVectors": [
    "wpe",
    "ln_f.weight",
    "ln_f.bias"
  ],
  "layerVectors": [
    "ln_1.weight",
    "ln_1.bias",
    "ln_2.weight",
    "ln_2.bias"
  ]
});

export const GPU_COMMANDS = deepFreeze({
  "ints": 11,
  "ops": [
    "embed",
    "layernorm",
    "linear",
    "store_kv",
    "attention"
  ],
  "activations": [
    "x",
    "xb",
    "qkv",
    "att",
    "fc",
    "logits"
  ],
  "matrices": [
    "attn_qkv",
    "attn_proj",
    "mlp_fc",
    "mlp_proj",
    "lm_head"
  ],
  "norms": [
    "ln_1",
    "ln_2",
    "ln_f"
  ],
  "epilogues": [
    "store",
    "gelu",
    "add"
  ]
});

export const SAMPLING_DEFAULTS = deepFreeze({
  "temperature": 1,
  "topK": 0,
  "topP": 1,
  "repetitionPenalty": 1,
  "minP": 0,
  "typicalP": 1,
  "noRepeatNgramSize": 0,
  "presencePenalty": 0,
  "frequencyPenalty": 0,
  "logitBias": [],
  "badWords": [],
  "minNewTokens": 0,
  "eosToken": -1,
  "seed": 0
});
