// Tests of gpt2-wasm, the command line (web/cli/cli.js, cli_args.js, cli_cache.js, cli_progress.js): its output
// modes, its flags (each generate() and loadModel() option, parsed as node:util parseArgs does, errors naming
// the flag as typed), Hugging Face repository ids, the disk cache of remote models (a local HTTP server stands
// for the Hub, and a temporary folder for the cache) and the progress line.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { USAGE, parseCliArguments } from '../../web/cli/cli_args.js';
import { cacheDirectory, resolveModelSource } from '../../web/cli/cli_cache.js';
import { formatProgress } from '../../web/cli/cli_progress.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { CLI_PATH, runCli, runCliOnTerminal } from './cli_runner.js';
import { send, sendRange, startFileServer } from './file_server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;
const GGUF_NAME = 'tiny-shakespeare.Q4_0.gguf';

jest.setTimeout(60_000);  // command-line processes take seconds on a shared machine

const cli = runCli;
const cliError = (args, env) => cli(args, env).then(() => null, (error) => error);

async function apiText(prompt, options, load = {}) {
  const model = await loadModel(BUNDLED, load);
  try {
    let text = '';
    for await (const piece of model.generate(prompt, options)) text += piece.text;
    return text;
  } finally {
    model.dispose();
  }
}

describe('output', () => {
  test('streams text to stdout and stats to stderr', async () => {
    const { stdout, stderr } = await cli(['-n', '8', '--seed', '1', '--temperature', '0', 'ROMEO:']);
    expect(stdout.trim().length).toBeGreaterThan(0);
    expect(stderr).toMatch(/prompt tokens.*generated.*tokens\/s/);
  });

  test('-i continues the text with each line read from stdin, reusing the cache: the second line reuses tokens', async () => {
    const child = execFile('node', [CLI_PATH, '-i', '-n', '8', '--temperature', '0'], { encoding: 'utf8' });
    child.stdin.end('ROMEO:\n And\n');
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data) => (stdout += data));
    child.stderr.on('data', (data) => (stderr += data));
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(0);
    const reused = [...stderr.matchAll(/(\d+) prompt tokens \((\d+) reused\)/g)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(reused).toHaveLength(2);
    expect(reused[0][1]).toBe(0);
    // The first line and its continuation (8 tokens, the last of which was sampled but not yet fed).
    expect(reused[1][1]).toBe(reused[0][0] + 8 - 1);
    const { stdout: alone } = await cli(['-n', '8', '--temperature', '0', 'ROMEO:']);
    expect(stdout.startsWith(alone)).toBe(true);  // the first line's continuation, as without -i
    expect(stdout.length).toBeGreaterThan(alone.length);
  });

  test('--score prints each token\'s text, logprob and rank, then the total and perplexity', async () => {
    const { stdout } = await cli(['--score', 'ROMEO: Good morrow!']);
    const lines = stdout.trim().split('\n');
    const total = lines.pop();
    expect(lines.map((line) => JSON.parse(line.split('\t')[0])).join('')).toBe('ROMEO: Good morrow!');
    for (const line of lines) expect(line).toMatch(/^"[^\t]*"\t-\d+\.\d{4}\t[1-9]\d*$/);
    expect(total).toMatch(/^total -\d+\.\d{4} perplexity \d+\.\d{4}$/);
  });

  test('--score --kv-cache fp32 prints the API\'s log-probabilities with the fp32 cache', async () => {
    const text = 'ROMEO: Good morrow!';
    const { stdout } = await cli(['--score', '--kv-cache', 'fp32', text]);
    const model = await loadModel(BUNDLED);
    try {
      const { tokens, totalLogprob, perplexity } = await model.score(text, { kvCache: 'fp32' });
      expect(stdout).toBe([...tokens.map((t) => `${JSON.stringify(t.text)}\t${t.logprob.toFixed(4)}\t${t.rank}\n`),
        `total ${totalLogprob.toFixed(4)} perplexity ${perplexity.toFixed(4)}\n`].join(''));
    } finally {
      model.dispose();
    }
  });

  test('--score --top-alternatives 2 ends each token\'s line with the two likeliest tokens and their logprobs', async () => {
    const { stdout } = await cli(['--score', '--top-alternatives=2', 'ROMEO: Good morrow!']);
    const lines = stdout.trim().split('\n').slice(0, -1);
    for (const line of lines) expect(line).toMatch(/^"[^\t]*"\t-\d+\.\d{4}\t[1-9]\d*(\t"[^\t]*"\t-\d+\.\d{4}){2}$/);
    // A token of rank 1 is its own likeliest alternative.
    const first = lines.map((line) => line.split('\t')).find((cells) => cells[2] === '1');
    expect(first[3]).toBe(first[0]);
  });

  test('--top-alternatives 3 prints one line per token (text, probability, three alternatives): the same text as without', async () => {
    const args = ['-n', '12', '--temperature', '0', 'ROMEO:'];
    const { stdout } = await cli(['--top-alternatives', '3', ...args]);
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(12);
    for (const line of lines) expect(line).toMatch(/^"[^\t]*"\t[01]\.\d{4}(\t"[^\t]*"\t[01]\.\d{4}){3}$/);
    const text = lines.map((line) => JSON.parse(line.split('\t')[0])).join('');
    expect(`${text}\n`).toBe((await cli(args)).stdout);
  });

  // --inspect's output as model.inspect gives its numbers: the logit lens's top 5 at the last position per layer,
  // then per layer the 3 positions of the highest attention averaged over the heads.
  async function apiInspection(text, { kvCache, ...load }) {
    const model = await loadModel(BUNDLED, load);
    try {
      const { tokens, positions: [last], layers, heads, logitLens, attention } = await model.inspect(text, { topK: 5, kvCache });
      const quoted = (at) => JSON.stringify(tokens[at].text);
      const lens = layers.map((layer, l) => `layer ${layer}${logitLens[l][0].map((e) => `\t${JSON.stringify(e.text)}\t${e.probability.toFixed(4)}`).join('')}\n`);
      const attended = layers.map((layer, l) => {
        const mean = [];
        for (let at = 0; at <= last; at++) {
          let sum = 0;
          for (let h = 0; h < heads.length; h++) sum += attention[l][h][0][at];
          mean.push({ at, weight: sum / heads.length });
        }
        const top = mean.sort((a, b) => b.weight - a.weight || a.at - b.at).slice(0, 3);
        return `layer ${layer}${top.map(({ at, weight }) => `\t${at} ${quoted(at)}\t${weight.toFixed(4)}`).join('')}\n`;
      });
      return [`logit lens at position ${last}, ${quoted(last)}: the 5 likeliest next tokens after each layer\n`, ...lens,
        `attention at position ${last}, ${quoted(last)}: the 3 positions it attends to most, averaged over the 4 heads\n`, ...attended].join('');
    } finally {
      model.dispose();
    }
  }

  test.each([
    [[], {}],
    [['--kv-cache', 'fp32'], { kvCache: 'fp32' }],
    [['--weights', 'int8', '--kv-cache=int8'], { weights: 'int8', kvCache: 'int8' }],
  ])('--inspect %j prints each layer\'s logit lens and most attended positions at the last token, as model.inspect gives them',
    async (args, options) => {
      const text = 'ROMEO: Good morrow, cousin';
      const { stdout } = await cli(['--inspect', ...args, text]);
      const lines = stdout.split('\n');
      // the bundled model's 4 layers, twice, under their two heading lines
      expect(lines).toHaveLength(11);
      expect(lines[0]).toBe('logit lens at position 7, " cousin": the 5 likeliest next tokens after each layer');
      lines.slice(1, 5).forEach((line, l) => expect(line).toMatch(new RegExp(`^layer ${l}(\t"[^\t]*"\t[01]\\.\\d{4}){5}$`)));
      expect(lines[5]).toBe('attention at position 7, " cousin": the 3 positions it attends to most, averaged over the 4 heads');
      lines.slice(6, 10).forEach((line, l) => expect(line).toMatch(new RegExp(`^layer ${l}(\t[0-7] "[^\t]*"\t[01]\\.\\d{4}){3}$`)));
      expect(stdout).toBe(await apiInspection(text, options));
    });

  test('--inspect of a one-token text: its only position takes all the attention', async () => {
    const { stdout } = await cli(['--inspect', 'R']);
    expect(stdout.split('\n').slice(6, 10)).toEqual([0, 1, 2, 3].map((l) => `layer ${l}\t0 "R"\t1.0000`));
  });
});

// The API's run.sequences for the bundled model, the prompt and generate() options.
async function apiSequences(prompt, options) {
  const model = await loadModel(BUNDLED);
  try {
    const generation = model.generate(prompt, options);
    for await (const piece of generation) void piece;
    return generation.sequences;
  } finally {
    model.dispose();
  }
}

describe('several sequences', () => {
  test('--num-return-sequences 3 prints three blocks, each the API\'s sequence text for the same seed and options', async () => {
    const options = { maxNewTokens: 16, temperature: 0.9, seed: 4, numReturnSequences: 3 };
    const { stdout, stderr } = await cli(['-n', '16', '--temperature', '0.9', '--seed', '4', '--num-return-sequences', '3', 'ROMEO:']);
    const sequences = await apiSequences('ROMEO:', options);
    expect(sequences).toHaveLength(3);
    expect(stdout).toBe(sequences.map(({ text, score, stopReason }, i) =>
      `--- sequence ${i} (log-probability ${score.toFixed(4)}, stop: ${stopReason}) ---\n${text}\n`).join(''));
    expect(stderr).toMatch(/prompt tokens.*generated/);
  });

  test('--num-beams 4 --num-return-sequences 2 prints the API\'s two best hypotheses with their scores', async () => {
    const options = { maxNewTokens: 12, temperature: 0, numBeams: 4, numReturnSequences: 2, lengthPenalty: 0.5, earlyStopping: 'never' };
    const { stdout } = await cli(['-n', '12', '--temperature', '0', '--num-beams', '4', '--num-return-sequences', '2',
      '--length-penalty', '0.5', '--early-stopping', 'never', 'ROMEO:']);
    const sequences = await apiSequences('ROMEO:', options);
    expect(stdout).toBe(sequences.map(({ text, score, stopReason }, i) =>
      `--- sequence ${i} (score ${score.toFixed(4)}, stop: ${stopReason}) ---\n${text}\n`).join(''));
  });

  test('--num-return-sequences 1 streams the one text as without the flag', async () => {
    const args = ['-n', '8', '--seed', '2', 'ROMEO:'];
    expect((await cli(['--num-return-sequences', '1', ...args])).stdout).toBe((await cli(args)).stdout);
  });
});

describe('flags', () => {
  test('every generate() and loadModel() option has a flag, and the output is the API\'s with those options', async () => {
    const options = { maxNewTokens: 24, temperature: 0.8, topK: 20, topP: 0.9, repetitionPenalty: 1.3, seed: 7, stop: ['zz', 'qq'], stopAtEndOfText: false, kvCache: 'fp32' };
    const { stdout } = await cli([
      '--max-new-tokens', '24', '--temperature', '0.8', '--top-k', '20', '--top-p', '0.9', '--repetition-penalty', '1.3',
      '--seed', '7', '--stop', 'zz', '--stop=qq', '--ignore-eos', '--kv-cache', 'fp32', '--weights', 'int8', '--threads', '1',
      '--device', 'wasm', 'ROMEO:',
    ]);
    expect(stdout).toBe(`${await apiText('ROMEO:', options, { weights: 'int8', device: 'wasm' })}\n`);
  });

  test('--speculative lookup prints the text it gives without, and the stats say how many drafted tokens were kept', async () => {
    const args = ['-n', '48', '--temperature', '0', '--ignore-eos', 'ROMEO:\nBut soft, what light through yonder window breaks?\nROMEO:\nBut soft,'];
    const plain = await cli(args);
    const speculated = await cli(['--speculative', 'lookup', '--max-draft-tokens', '6', ...args]);
    expect(speculated.stdout).toBe(plain.stdout);
    expect(speculated.stderr).toMatch(/; [1-9]\d* of [1-9]\d* drafted tokens accepted; /);
    expect(plain.stderr).not.toMatch(/drafted/);
  });

  test('--speculative MODEL drafts with that model and prints the text it gives without', async () => {
    const args = ['-n', '40', '--temperature', '0', '--ignore-eos', 'ROMEO:'];
    const plain = await cli(args);
    const speculated = await cli(['--speculative', 'public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', ...args]);
    expect(speculated.stdout).toBe(plain.stdout);
    expect(speculated.stderr).toMatch(/; [1-9]\d* of [1-9]\d* drafted tokens accepted; /);
    const missing = await cliError(['--speculative', './no/such/draft.gguf', ...args]);
    expect(missing.stderr).toMatch(/^gpt2-wasm: --speculative: .*no\/such\/draft\.gguf/);
  });

  test('the decoding flags set generate()\'s options: numbers, --logit-bias TOKEN:BIAS pairs and --bad-words texts', () => {
    const { options } = parseCliArguments([
      '--min-p', '0.05', '--typical-p=0.9', '--no-repeat-ngram-size', '3', '--presence-penalty', '-0.5', '--frequency-penalty', '1.2',
      '--logit-bias', '50256:-inf, 13:2.5', '--bad-words', ' thou, thee ,', '--min-new-tokens', '8', 'ROMEO:',
    ]);
    expect(options).toEqual({
      minP: 0.05, typicalP: 0.9, noRepeatNgramSize: 3, presencePenalty: -0.5, frequencyPenalty: 1.2,
      logitBias: { 50256: -Infinity, 13: 2.5 }, badWords: ['thou', 'thee'], minNewTokens: 8,
    });
  });

  test('--logit-bias "" and --bad-words "" are none: {} and []', () => {
    expect(parseCliArguments(['--logit-bias=', '--bad-words=', 'p']).options).toEqual({ logitBias: {}, badWords: [] });
  });

  test('--logit-bias 50256:-inf never ends the text at <|endoftext|>, as the API with that bias', async () => {
    const args = ['-n', '24', '--temperature', '0', '--logit-bias', '50256:-inf', 'ROMEO:'];
    const { stdout, stderr } = await cli(args);
    expect(stdout).toBe(`${await apiText('ROMEO:', { maxNewTokens: 24, temperature: 0, logitBias: { 50256: -Infinity } })}\n`);
    expect(stderr).toMatch(/stop: length;/);
  });

  test('each --stop ends the text before it', async () => {
    const args = ['-n', '40', '--temperature', '0', 'ROMEO:'];
    const free = (await cli(args)).stdout;
    const stopAt = Math.min(free.indexOf("'"), free.indexOf(' '));
    expect(stopAt).toBeGreaterThan(0);  // both are in the text, after its start
    const { stdout, stderr } = await cli(['--stop', "'", '--stop', ' ', ...args]);
    expect(stdout).toBe(`${free.slice(0, stopAt)}\n`);
    expect(stderr).toMatch(/stop: stop;/);
  });

  test('--flag=value, -n5 and --model=DIR are read as --flag value; after --, a prompt may start with -', async () => {
    const { stdout } = await cli([`--model=${BUNDLED}`, '-n8', '--temperature=0', '--', '-ROMEO']);
    expect(stdout).toBe(`${await apiText('-ROMEO', { maxNewTokens: 8, temperature: 0 })}\n`);
  });

  test.each([
    [['-n', 'x', 'p'], '-n: expected a positive integer, got "x"'],
    [['--max-new-tokens=0', 'p'], '--max-new-tokens: expected a positive integer, got "0"'],
    [['--top-p', '2', 'p'], '--top-p: expected a number in [0, 1] (0 = the most likely token only), got "2"'],
    [['--temperature', '0x1', 'p'], '--temperature: expected a number in [0, 3.4028234663852886e+38] (0 = greedy), got "0x1"'],
    [['--temperature', '1e39', 'p'], '--temperature: expected a number in [0, 3.4028234663852886e+38] (0 = greedy), got "1e39"'],
    [['--temperature', ' 1 ', 'p'], '--temperature: expected a number in [0, 3.4028234663852886e+38] (0 = greedy), got " 1 "'],
    [['--repetition-penalty', '0', 'p'], '--repetition-penalty: expected a number in (0, 3.4028234663852886e+38] (1 = off), got "0"'],
    [['--top-k', '4294967297', 'p'], '--top-k: expected an integer in [0, 2147483647] (0 = off), got "4294967297"'],
    [['--no-repeat-ngram-size', '2147483648', 'p'], '--no-repeat-ngram-size: expected an integer in [0, 2147483647] (0 = off), got "2147483648"'],
    [['--seed', '9007199254740992', 'p'], '--seed: expected an integer in [0, 2^53), got "9007199254740992"'],
    [['--seed', '1.5', 'p'], '--seed: expected an integer in [0, 2^53), got "1.5"'],
    [['--stop=', 'p'], '--stop: expected a non-empty text, got ""'],
    [['--kv-cache', 'f16', 'p'], '--kv-cache: expected "int8" or "fp32", got "f16"'],
    [['--top-alternatives', '-1', 'p'], '--top-alternatives: expected an integer in [0, 2147483647], got "-1"'],
    [['--score', '--top-alternatives', '2147483648', 'p'], '--top-alternatives: expected an integer in [0, 2147483647], got "2147483648"'],
    [['--weights', 'q4', 'p'], '--weights: expected "fp32" or "int8", got "q4"'],
    [['--threads', 'many', 'p'], '--threads: expected "auto" or an integer from 1 to 16, got "many"'],
    [['--threads', '17', 'p'], '--threads: expected "auto" or an integer from 1 to 16, got "17"'],
    [['--device', 'bogus', 'p'], '--device: expected "auto", "webgpu" or "wasm", got "bogus"'],
    [['--device=GPU', 'p'], '--device: expected "auto", "webgpu" or "wasm", got "GPU"'],
    [['--speculative', 'lookup', '--max-draft-tokens', '17', 'p'], '--max-draft-tokens: expected an integer in [1, 16], got "17"'],
    [['--max-draft-tokens', '4', 'p'], '--max-draft-tokens needs --speculative'],
    [['--min-p', '1.5', 'p'], '--min-p: expected a number in [0, 1] (0 = off), got "1.5"'],
    [['--min-new-tokens', '-1', 'p'], '--min-new-tokens: expected an integer in [0, 2147483647] (0 = off), got "-1"'],
    [['--presence-penalty', 'x', 'p'], '--presence-penalty: expected a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] (0 = off), got "x"'],
    [['--frequency-penalty', '-3e38', '--presence-penalty', '1e39', 'p'], '--presence-penalty: expected a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] (0 = off), got "1e39"'],
    [['--logit-bias', '13:1e39', 'p'], '--logit-bias: expected a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] or -Infinity (a ban), got "13:1e39"'],
    [['--logit-bias', '4294967309:1', 'p'], '--logit-bias: option logitBias has a key that is not a token id: "4294967309"'],
    [['--logit-bias', '13=2', 'p'], '--logit-bias: "13=2" is not TOKEN:BIAS'],
    [['--logit-bias=13:1,13:2', 'p'], '--logit-bias: token 13 is given twice'],
    [['p', '-n'], '-n: missing value'],
    [['--no-cache=yes', 'p'], '--no-cache: takes no value, got "yes"'],
    [['-ROMEO'], 'unknown option -R (a prompt that starts with - goes after --)'],
    [['--bogus', 'p'], 'unknown option --bogus (a prompt that starts with - goes after --)'],
    [['two', 'words'], 'give the prompt as one argument (quote it)'],
    [['-i', 'p'], '-i reads the text from stdin: give no prompt'],
    [['-i', '--score'], '-i and --score cannot be combined'],
    [['--score', '-n', '5', '--ignore-eos', 'p'], '--score takes no generation options, got -n, --ignore-eos'],
    [['--inspect', '-n', '5', '--top-k', '3', '--kv-cache', 'fp32', 'p'], '--inspect takes no generation options, got -n, --top-k'],
    [['--inspect', '--top-alternatives', '2', '--no-cache', 'p'], '--inspect takes no generation options, got --top-alternatives, --no-cache'],
    [['--inspect', '--kv-cache', 'f16', 'p'], '--kv-cache: expected "int8" or "fp32", got "f16"'],
    [['--score', '--inspect', 'p'], '--score and --inspect cannot be combined'],
    [['-i', '--inspect'], '-i and --inspect cannot be combined'],
    [['--inspect'], 'missing text (gpt2-wasm --help for the usage)'],
    [['-n', '5'], 'missing prompt (gpt2-wasm --help for the usage)'],
    [['--num-return-sequences', '3', '--top-alternatives', '2', 'p'], '--top-alternatives and --num-return-sequences > 1 cannot be combined'],
    [['-i', '--num-return-sequences', '2'], '-i and --num-return-sequences > 1 cannot be combined'],
    [['--num-return-sequences', '17', 'p'], '--num-return-sequences: expected an integer in [1, 16], got "17"'],
    [['--num-beams', '2', '--num-return-sequences', '3', 'p'], '--num-return-sequences: expected an integer in [1, numBeams = 2], got "3"'],
    [['--early-stopping', 'sometimes', '--num-beams', '2', 'p'], '--early-stopping: expected true, false or "never", got "sometimes"'],
  ])('%j fails with "%s"', (args, message) => {
    expect(() => parseCliArguments(args)).toThrow(new Error(message));
  });

  test('--num-beams with more --max-new-tokens than the model\'s context is refused in one line once the model is known', async () => {
    const error = await cliError(['--num-beams', '2', '--temperature', '0', '-n', '257', 'ROMEO:']);
    expect({ code: error.code, stderr: error.stderr }).toEqual({
      code: 1,
      stderr: "gpt2-wasm: generate: option maxNewTokens must be at most the model's context (256 tokens) with numBeams > 1, got 257\n",
    });
  });

  test('--score with more alternatives in all than one score returns is refused in one line before it runs', async () => {
    // 181 tokens: 181 x 50257 alternatives are more than 4,194,304
    const error = await cliError(['--score', '--top-alternatives', '50257', 'ROMEO: '.repeat(60)]);
    expect({ code: error.code, stderr: error.stderr }).toEqual({
      code: 1,
      stderr: 'gpt2-wasm: score: option topAlternatives 50257 for 181 scored tokens asks for 9096517 alternatives, more than 4194304 (the most one score returns)\n',
    });
  });

  test('errors exit 1 with one line on stderr', async () => {
    for (const args of [['--top-p', '2', 'x'], ['--model', '/nonexistent', 'x'], ['--bogus']]) {
      const error = await cliError(args);
      expect(error.code).toBe(1);
      expect(error.stderr).toMatch(/^gpt2-wasm: [^\n]+\n$/);
    }
  });

  test('--help lists flags that are all accepted, and exits 0', async () => {
    const { stdout } = await cli(['--help']);
    expect(stdout).toBe(`${USAGE}\n`);
    const flags = [...new Set(USAGE.match(/(?<=\s)--?[a-z][a-z-]*/g))];
    expect(flags.length).toBeGreaterThanOrEqual(19);
    for (const flag of flags) expect(() => parseCliArguments([flag, '1'])).not.toThrow(/unknown option/);
  });
});

describe('device', () => {
  const greedy = ['-n', '8', '--temperature', '0', 'ROMEO:'];

  test('--device wasm, --device auto and no --device all run on the CPU here and print the API\'s text; the stats say wasm', async () => {
    const expected = `${await apiText('ROMEO:', { maxNewTokens: 8, temperature: 0 }, { device: 'wasm' })}\n`;
    for (const device of [['--device', 'wasm'], ['--device', 'auto'], []]) {
      const { stdout, stderr } = await cli([...device, ...greedy]);
      expect(stdout).toBe(expected);
      expect(stderr).toMatch(/; 1 thread; device: wasm\]\n$/);
    }
  });

  test('--device webgpu in a Node without WebGPU (no webgpu package) fails with the API\'s one line and exit status 1', async () => {
    await expect(import('webgpu')).rejects.toThrow(/Cannot find (module|package) 'webgpu'/);  // the optional package is absent here
    const error = await cliError(['--device', 'webgpu', ...greedy]);
    expect(error.code).toBe(1);
    expect(error.stdout).toBe('');
    expect(error.stderr).toBe("gpt2-wasm: device 'webgpu': WebGPU is not available here (no navigator.gpu)\n");
  });

  test('a bad --device is a usage error: one line naming the flag and the value, and exit status 1', async () => {
    const error = await cliError(['--device', 'gpu', ...greedy]);
    expect(error.code).toBe(1);
    expect(error.stdout).toBe('');
    expect(error.stderr).toBe('gpt2-wasm: --device: expected "auto", "webgpu" or "wasm", got "gpu"\n');
  });
});

describe('model sources', () => {
  test('a Hugging Face repository id is its folder on the Hub, owner/name/FILE.gguf that file; paths and URLs stay', () => {
    expect(resolveModelSource('openai-community/gpt2')).toEqual({ kind: 'url', url: 'https://huggingface.co/openai-community/gpt2/resolve/main/' });
    expect(resolveModelSource('owner/repo.name/Model-Q4_0.gguf')).toEqual({ kind: 'url', url: 'https://huggingface.co/owner/repo.name/resolve/main/Model-Q4_0.gguf' });
    expect(resolveModelSource('owner/name', 'http://127.0.0.1:9/')).toEqual({ kind: 'url', url: 'http://127.0.0.1:9/owner/name/resolve/main/' });
    expect(resolveModelSource('https://example.com/m/')).toEqual({ kind: 'url', url: 'https://example.com/m/' });
    expect(resolveModelSource('tests/fixtures')).toEqual({ kind: 'path', path: 'tests/fixtures' });  // an existing folder, not a Hub id
    expect(resolveModelSource('./owner/name')).toEqual({ kind: 'path', path: './owner/name' });
    expect(resolveModelSource('/models/gpt2')).toEqual({ kind: 'path', path: '/models/gpt2' });
  });

  test('the cache folder is $GPT2_WASM_CACHE_DIR, else the platform\'s', () => {
    expect(cacheDirectory({ GPT2_WASM_CACHE_DIR: '/tmp/c' }, 'linux', '/home/u')).toBe('/tmp/c');
    expect(cacheDirectory({}, 'linux', '/home/u')).toBe('/home/u/.cache/gpt2-wasm');
    expect(cacheDirectory({ XDG_CACHE_HOME: '/xdg' }, 'linux', '/home/u')).toBe('/xdg/gpt2-wasm');
    expect(cacheDirectory({ XDG_CACHE_HOME: 'relative' }, 'linux', '/home/u')).toBe('/home/u/.cache/gpt2-wasm');
    expect(cacheDirectory({}, 'darwin', '/Users/u')).toBe('/Users/u/Library/Caches/gpt2-wasm');
    expect(cacheDirectory({ LOCALAPPDATA: 'C:/Users/u/AppData/Local' }, 'win32', 'C:/Users/u')).toBe(join('C:/Users/u/AppData/Local', 'gpt2-wasm'));
  });
});

describe('disk cache of remote models', () => {
  const files = Object.fromEntries(['config.json', 'model.safetensors', 'vocab.json', 'merges.txt', GGUF_NAME].map((name) => [name, readFileSync(BUNDLED + name)]));
  const args = ['-n', '8', '--temperature', '0', 'ROMEO:'];
  let server;
  let cacheDir;
  let env;

  // The bytes of NAME's download kept so far, as its .partial file in the cache holds them. A request's arrival
  // reads it: the client asks again only after storing every byte it got, and the bytes in flight when a
  // connection breaks are lost, so this, not the byte the server cut at, is where a resumed download stands.
  const storedBytes = (name) => {
    const partial = readdirSync(cacheDir, { recursive: true }).find((path) => basename(path).startsWith(`${name}.`) && path.endsWith('.partial'));
    return partial ? statSync(join(cacheDir, partial)).size : 0;
  };
  let stored;  // name -> storedBytes(name) at each of its requests

  beforeEach(async () => {
    stored = {};
    const answer = (respond) => (res, body, name, req) => respond(res, body, name, req, (stored[name] ??= []).push(storedBytes(name)));
    server = await startFileServer(files, { hub: (res, body) => send(res, body, { 'Content-Length': body.length }),
      // The first answer breaks off at half; the next is the rest (206) from the Range asked.
      resume: answer((res, body, name, req, n) => sendRange(req, res, body, { cutAt: n === 1 ? body.length >> 1 : null })),
      // The whole file each time (the Range is not honoured), broken off at 90 %, then at the bytes stored before.
      cut: answer((res, body, name, req, n) => sendRange(req, res, body, { honourRange: false, cutAt: n === 1 ? Math.floor(body.length * 0.9) : stored[name][1] })),
      badConfig: (res, body, name) => send(res, name === 'config.json' ? 'not json' : body) });
    cacheDir = mkdtempSync(join(tmpdir(), 'gpt2-wasm-cli-cache-'));
    env = { HF_ENDPOINT: server.baseUrl, GPT2_WASM_CACHE_DIR: cacheDir };
  });

  afterEach(async () => {
    await server.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const cachedFiles = () => readdirSync(cacheDir, { recursive: true }).filter((path) => /\.\w+$/.test(path)).map((path) => path.split(/[\\/]/).pop()).sort();

  test('a Hub repository is downloaded once: the second run makes no request and prints the same text', async () => {
    const { stdout: local } = await cli(args);
    const first = await cli(['--model', 'hub/shakespeare', ...args], env);
    expect(first.stdout).toBe(local);
    expect(server.requests().map((r) => r.path).sort()).toEqual(
      ['config.json', 'merges.txt', 'model.safetensors', 'vocab.json'].map((name) => `/hub/shakespeare/resolve/main/${name}`),
    );
    const second = await cli(['--model', 'hub/shakespeare', ...args], env);
    expect(second.stdout).toBe(local);
    expect(server.requestCount()).toBe(4);
    expect(cachedFiles()).toEqual(['config.json', 'merges.txt', 'model.safetensors', 'vocab.json']);
  });

  test('a .gguf file in a Hub repository, or at a URL, is one download', async () => {
    const first = await cli(['--model', `hub/shakespeare/${GGUF_NAME}`, ...args], env);
    expect(first.stdout.trim().length).toBeGreaterThan(0);
    await cli(['--model', `hub/shakespeare/${GGUF_NAME}`, ...args], env);
    await cli(['--model', `${server.baseUrl}/hub/shakespeare/resolve/main/${GGUF_NAME}`, ...args], env);
    expect(server.requestCount()).toBe(1);
    expect(cachedFiles()).toEqual([GGUF_NAME]);
  });

  test('a connection that breaks off is resumed from the byte it reached (Range), and the text is the same', async () => {
    const { stdout: local } = await cli(args);
    const { stdout } = await cli(['--model', `${server.baseUrl}/resume/m`, ...args], env);
    expect(stdout).toBe(local);
    const weights = server.requests().filter((r) => r.path.endsWith('/model.safetensors')).map((r) => r.range);
    const [, resumedAt] = stored['model.safetensors'];
    expect(weights).toEqual([null, `bytes=${resumedAt}-`]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(files['model.safetensors'].length >> 1);
    expect(cachedFiles()).toEqual(['config.json', 'merges.txt', 'model.safetensors', 'vocab.json']);
  });

  test('a download that keeps breaking off gives up after 5 attempts that get no further, and leaves nothing in the cache', async () => {
    const error = await cliError(['--model', `${server.baseUrl}/cut/${GGUF_NAME}`, ...args], env);
    expect(error.code).toBe(1);
    const [size, reached] = [files[GGUF_NAME].length, stored[GGUF_NAME][1]];
    expect(reached).toBeGreaterThan(size * 0.8);
    // the server reads the stored bytes when a request arrives, which can be a write ahead of or behind the
    // downloader's own count of what it kept: the message's figure is that count, within a few chunks of reached
    const message = new RegExp(`^gpt2-wasm: ${GGUF_NAME}: network error: the download stopped at (\\d+) of ${size} bytes after 6 attempts \\([^\\n]+\\)\\n$`).exec(error.stderr);
    expect(message).not.toBeNull();
    expect(Math.abs(Number(message[1]) - reached)).toBeLessThan(size * 0.05);
    expect(server.requestCount()).toBe(6);
    expect(cachedFiles()).toEqual([]);
  });

  test('a downloaded model whose files prove invalid is removed from the cache', async () => {
    const error = await cliError(['--model', `${server.baseUrl}/badConfig/m`, ...args], env);
    expect(error.stderr).toMatch(new RegExp(`^gpt2-wasm: ${server.baseUrl}/badConfig/m: config.json: [^\\n]+ \\(removed from the cache\\)\\n$`));
    expect(cachedFiles()).toEqual([]);
  });

  // util-linux's script(1) runs the command on a pseudo-terminal, which reports a width of 0 columns.
  test('on a terminal, each file\'s progress line is drawn in place and ends complete; without one there is none', async () => {
    const { stdout: terminal } = await runCliOnTerminal(['--model', 'hub/shakespeare', ...args], env);
    const lines = terminal.split('\r\x1b[K').map((line) => line.trim()).filter(Boolean);
    for (const name of ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt']) {
      const size = (files[name].length / 1e6).toFixed(1);
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${name.replace('.', '\\.')} \\[#{24}\\] 100% ${size}/${size} MB`)));
    }
    rmSync(cacheDir, { recursive: true, force: true });
    const { stderr: piped } = await cli(['--model', 'hub/shakespeare', ...args], env);
    expect(piped).not.toMatch(/\[[#.]+\]/);
  });

  test('a missing file is an HTTP error naming its URL', async () => {
    const error = await cliError(['--model', 'hub/none/missing.gguf', ...args], env);
    expect(error.stderr).toBe(`gpt2-wasm: missing.gguf: HTTP 404 Not Found from ${server.baseUrl}/hub/none/resolve/main/missing.gguf\n`);
  });
});

describe('progress line', () => {
  test('shows the file, a bar, the percentage and the megabytes, cut to the terminal\'s width', () => {
    expect(formatProgress({ file: 'model.safetensors', loaded: 11_500_000, total: 23_000_000 }))
      .toBe('model.safetensors [############............]  50% 11.5/23.0 MB');
    expect(formatProgress({ file: 'vocab.json', loaded: 1_042_301, total: 1_042_301 }))
      .toBe('vocab.json [########################] 100% 1.0/1.0 MB');
    expect(formatProgress({ file: 'm.gguf', loaded: 2_000_000, total: null })).toBe('m.gguf 2.0 MB');
    // the page's and the widget's megabytes: thousands grouped
    expect(formatProgress({ file: 'model.safetensors', loaded: 1_548_200_000, total: 6_230_444_800 }))
      .toBe('model.safetensors [######..................]  24% 1,548.2/6,230.4 MB');
    expect(formatProgress({ file: 'model.safetensors', loaded: 0, total: 10 }, 20)).toBe('model.safetensors [');
  });
});
