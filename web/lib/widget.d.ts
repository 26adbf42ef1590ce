// TypeScript declarations of widget.js (served as gpt2-widget.js): the GPT2Widget global a classic
// <script src=".../gpt2-widget.js"> tag defines. A script, not a module: include it (tsconfig "files", or
// /// <reference path="…/widget.d.ts" />). public/embed.html documents the options. Checked against
// tests/types/example.ts by tests/js/types.test.js.

declare namespace GPT2Widget {
  /**
   * Each one also a data-* attribute of the tag or of a placeholder (data-max-new-tokens, …; data-logit-bias="50256:-inf,
   * 13:2.5", data-bad-words="thou, thee", data-early-stopping="never"). The logits processors and the beam search's
   * options are generate()'s, with its defaults.
   */
  interface MountOptions extends Pick<import('./gpt2.js').GenerateOptions, 'minP' | 'typicalP' | 'noRepeatNgramSize'
    | 'presencePenalty' | 'frequencyPenalty' | 'logitBias' | 'badWords' | 'minNewTokens' | 'numBeams' | 'lengthPenalty'
    | 'earlyStopping'> {
    /** a model folder URL or a .gguf file URL, relative to the page; default: the bundled model */
    model?: string | URL;
    /** the text in the prompt box; '' */
    prompt?: string;
    /** an integer in [1, 2^53); 64 */
    maxNewTokens?: number;
    /** in [0, FLT_MAX], 0 = greedy; 0.8 */
    temperature?: number;
    /** an integer in [0, 2147483647], 0 = off; 40 */
    topK?: number;
    /** in [0, 1], 1 = off; 1 */
    topP?: number;
    /** in (0, FLT_MAX], 1 = off; 1 */
    repetitionPenalty?: number;
    /** an integer in [0, 2^53); random */
    seed?: number;
    /** non-empty strings: generation ends before the first one in the text; [] */
    stop?: string | readonly string[];
    /** generate once the model is loaded; false */
    autoGenerate?: boolean;
    /** download the model on the first Generate; false */
    lazy?: boolean;
    /** 'auto' */
    theme?: 'auto' | 'light' | 'dark';
    /** where the model runs, as loadModel's device option: 'auto' (a hardware GPU, else the CPU) */
    device?: 'auto' | 'webgpu' | 'wasm';
    /** generate's speculative option (data-speculative="lookup": prompt-lookup drafts); off */
    speculative?: import('./gpt2.js').SpeculativeOptions;
    /** in [1, 16]: n > 1 shows one output per sequence ("Sequence 1", …); 1 */
    numReturnSequences?: number;
  }

  interface Widget {
    readonly element: Element;
    /** Resolves when the generation has ended; does nothing while one runs. */
    generate(): Promise<void>;
    stop(): void;
    /** Stops it, empties its shadow root and releases its model (also done by removing its element). */
    destroy(): void;
  }

  /**
   * Renders a widget in element (one that can have a shadow root). Every option is checked first: a value it does
   * not take throws (TypeError / RangeError naming it) and nothing is rendered.
   */
  function mount(element: Element, options?: MountOptions): Widget;

  /**
   * Mounts the [data-gpt2-widget] placeholders of container that have no widget yet. A placeholder with a data-*
   * value the widget does not take shows one line naming the attribute instead, and is not among the widgets.
   */
  function mountAll(container?: ParentNode): Widget[];
}

interface Window {
  readonly GPT2Widget: typeof GPT2Widget;
}
