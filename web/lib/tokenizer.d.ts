// TypeScript declarations of tokenizer.js: GPT-2's byte-level BPE tokenizer. Checked against
// tests/types/example.ts by tests/js/types.test.js.

/** Token ids: an array or a typed array of integers. */
export type TokenIds =
  | readonly number[]
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array;

export interface Tokenizer {
  encode(text: string): number[];
  /** Throws for an id outside the vocabulary. */
  decode(ids: TokenIds): string;
  createDecoder(): StreamingDecoder;
  readonly eosId: number;
  readonly vocabSize: number;
}

/** Decodes one id at a time, holding back an incomplete UTF-8 character until the id that completes it. */
export interface StreamingDecoder {
  push(id: number): string;
  /** what is held back, at the end */
  flush(): string;
}

/** A GGUF file's vocabulary (tokenizer.ggml.*), as EngineModel.readVocabulary() gives it. */
export interface Vocabulary {
  /** the token strings in id order, as vocab.json's keys */
  tokens: readonly string[];
  /** merges.txt's lines ("left right") */
  merges: readonly string[];
  eosTokenId: number;
  bosTokenId?: number | null;
}

/** vocab: the parsed vocab.json (token string -> id); merges: the text of merges.txt. */
export function createTokenizer(vocab: Readonly<Record<string, number>>, merges: string): Tokenizer;

export function createTokenizerFromVocabulary(vocabulary: Vocabulary): Tokenizer;
