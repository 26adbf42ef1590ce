// The options' table (web/lib/generation/option_table.js) against every surface that names its options: the
// command line's flags and --help (derived from it), the widget's data-* attributes (derived), the page's controls
// (public/index.html, which the table names by id), the .d.ts comments and the docs' tables (written by hand, each
// held here to the table's ranges and defaults).
import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';
import { USAGE, parseCliArguments } from '../../web/cli/cli_args.js';
import { breaksRule, normalizeGenerateOptions } from '../../web/lib/generation/option_checks.js';
import { GENERATE_OPTIONS, INSPECT_GENERATION_OPTIONS, INSPECT_OPTIONS, MAX_FLOAT, SCORE_OPTIONS, SPECULATIVE_OPTIONS, defaultText, optionsWith }
  from '../../web/lib/generation/option_table.js';
import { GENERATE_OPTIONS as WIDGET_OPTIONS, completeOptions, optionsFromDataset } from '../../web/widget/widget_options.js';

const read = (path) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const kebab = (name) => name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);
const camel = (id) => id.replace(/-([a-z])/g, (_, letter) => letter.toUpperCase());
const isNumeric = ({ kind }) => kind === 'integer' || kind === 'number';
const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// An entry's range as the .d.ts comments and docs/api.md write it: "[0, 2147483647]", "(0, FLT_MAX]", "[1, 2^53)";
// null for the kinds whose values the comment names instead. float: how MAX_FLOAT is written.
function rangeWords({ kind, min, max, minExclusive }, float) {
  if (kind !== 'integer' && kind !== 'number') return null;
  const bound = (value) => (value === MAX_FLOAT ? float : value === -MAX_FLOAT ? `-${float}` : String(value));
  const upper = max === Number.MAX_SAFE_INTEGER ? '2^53)' : `${bound(max)}]`;
  return `${minExclusive ? '(' : '['}${bound(min)}, ${upper}`;
}

// A value as TypeScript writes it: 'int8', true, {}, 64.
const typeScriptValue = (value) => (typeof value === 'string' ? `'${value}'` : JSON.stringify(value));

// A default as a .d.ts comment ends with it: "; 64", "; 'int8'", "; random" (the seed), "; off" (speculative).
const typeScriptDefault = (name, value) => (value === undefined ? defaultText(name, {}) : typeScriptValue(value));

// An inspection's list (positions, layers, heads) has no value for a default: its doc says it, "(default: all)".
const listDefault = ({ doc }) => /\(default: ([^;)]+)/.exec(doc)[1];

describe('the table', () => {
  test('every option has a one-line doc, and a widget attribute is its data-* name (element.dataset names it as the option)', () => {
    for (const [name, entry] of [...Object.entries(GENERATE_OPTIONS), ...Object.entries(SPECULATIVE_OPTIONS)]) {
      expect([name, typeof entry.doc === 'string' && entry.doc.length > 0 && !entry.doc.includes('\n')]).toEqual([name, true]);
    }
    for (const [name, { attribute }] of optionsWith('attribute')) expect(attribute).toBe(`data-${kebab(name)}`);
  });

  test('beams and speculation are one rule, which the API and the page both ask', () => {
    expect(breaksRule('sequencesWithoutSpeculation', { numBeams: 4, speculative: true })).toBe(true);
    expect(breaksRule('sequencesWithoutSpeculation', { numBeams: 1, speculative: true })).toBe(false);
    expect(breaksRule('sequencesWithoutSpeculation', { numBeams: 4, speculative: false })).toBe(false);
    expect(() => normalizeGenerateOptions({ numBeams: 4, temperature: 0, speculative: {} }))
      .toThrow(new RangeError('generate: numBeams > 1 cannot be combined with speculative'));
    expect(() => normalizeGenerateOptions({ numReturnSequences: 2, speculative: {} }))
      .toThrow(new RangeError('generate: numReturnSequences > 1 cannot be combined with speculative'));
  });
});

describe('the command line', () => {
  // a flag's lines of --help: its own and the continuation lines under it
  const helpBlock = (usage) => USAGE.split(/\n(?= {2}-|[^ ])/).find((block) => block.startsWith(`  ${usage} `));
  const flagEntries = [...optionsWith('flag'), ...Object.entries(SPECULATIVE_OPTIONS)];

  test.each(flagEntries)('%s: its flag is in --help with its default, and is accepted', (name, entry) => {
    const usage = typeof entry.flag === 'string' ? entry.flag : entry.flag.usage;
    const block = helpBlock(usage);
    expect(block).toBeDefined();
    const long = /--[a-z-]+/.exec(usage)[0];
    if (typeof entry.flag === 'object' && entry.flag.sets !== undefined) {
      expect(parseCliArguments([long, 'p']).options).toEqual({ [name]: entry.flag.sets });
      return;
    }
    const fallback = name === 'draft' ? 'off' : defaultText(name, entry);
    expect(block.replace(/\s+/g, ' ')).toContain(`default ${fallback})`);
    if (isNumeric(entry) && entry.default !== undefined) {
      const args = name === 'maxDraftTokens' ? ['--speculative', 'lookup'] : [];
      const options = parseCliArguments([...args, long, String(entry.default), 'p']).options;
      expect(name === 'maxDraftTokens' ? options.speculative.maxDraftTokens : options[name]).toBe(entry.default);
    }
  });

  test('--help lines fit 114 columns, --score takes the options score() takes, and --inspect those inspect() shares with generate()', () => {
    for (const line of USAGE.split('\n')) expect(line.length).toBeLessThanOrEqual(114);
    expect(parseCliArguments(['--score', '--kv-cache', 'fp32', '--top-alternatives', '3', 'x']).options).toEqual({ kvCache: 'fp32', topAlternatives: 3 });
    expect(Object.keys(SCORE_OPTIONS)).toEqual(['topAlternatives', 'kvCache', 'signal']);
    expect(parseCliArguments(['--inspect', '--kv-cache', 'fp32', 'x']).options).toEqual({ kvCache: 'fp32' });
    expect(Object.keys(INSPECT_OPTIONS).filter((name) => INSPECT_OPTIONS[name] === GENERATE_OPTIONS[name])).toEqual(['kvCache']);
  });
});

describe('the widget', () => {
  test('its generation options are the table\'s with an attribute, each read from its attribute', () => {
    expect(WIDGET_OPTIONS).toEqual(optionsWith('attribute').map(([name]) => name));
    for (const [name, entry] of optionsWith('attribute')) {
      if (isNumeric(entry) && entry.default !== undefined) expect(optionsFromDataset({ [name]: String(entry.default) })).toEqual({ [name]: entry.default });
    }
    expect(optionsFromDataset({ speculative: 'lookup' })).toEqual({ speculative: { draft: 'prompt-lookup' } });
  });
});

describe('the page\'s controls (public/index.html)', () => {
  const html = read('public/index.html');
  const attributesOf = (tag) => Object.fromEntries([...tag.matchAll(/([\w-]+)(?:="([^"]*)")?/g)].slice(1).map(([, key, value]) => [key, value ?? '']));
  const controls = [...html.matchAll(/<(input|select|textarea)\b[^>]*>/g)].map(([tag, kind]) => ({ kind, ...attributesOf(tag) }));
  const byId = new Map(controls.filter((control) => control.id).map((control) => [control.id, control]));
  const pageState = read('web/page/page_state.js');

  // The control fits the entry: a number field within its range, of integers for an integer, its value within
  // both; a checkbox for a boolean (and speculative: on is prompt lookup); a menu of its values; a text field for
  // the text forms.
  function expectFits(name, entry, control) {
    const where = `${name} (${control.id ?? control['data-setting']})`;
    if (isNumeric(entry)) {
      expect([where, control.type]).toEqual([where, 'number']);
      if (control.min !== undefined) expect([where, Number(control.min) >= entry.min]).toEqual([where, true]);
      if (control.max !== undefined) expect([where, Number(control.max) <= entry.max]).toEqual([where, true]);
      if (entry.kind === 'integer') expect([where, control.step]).toEqual([where, '1']);
      if (control.value !== undefined) expect(() => normalizeGenerateOptions({ [name]: Number(control.value) })).not.toThrow();
    } else if (entry.kind === 'boolean' || name === 'speculative') {
      expect([where, control.type]).toEqual([where, 'checkbox']);
    } else if (entry.kind === 'choice') {
      const menu = new RegExp(`<select id="${control.id}"[^>]*>([\\s\\S]*?)</select>`).exec(html)[1];
      expect([where, [...menu.matchAll(/<option value="([^"]*)"/g)].map(([, value]) => value)]).toEqual([where, entry.values]);
    } else {
      expect([where, control.type]).toEqual([where, 'text']);
      expect(() => normalizeGenerateOptions({ [name]: entry.parse(control.placeholder) })).not.toThrow();
    }
  }

  test.each(optionsWith('control'))('%s: its control exists, fits its kind and range, and page_state.js names it', (name, entry) => {
    const control = byId.get(entry.control);
    expect(control).toBeDefined();
    expectFits(name, entry, control);
    expect(pageState).toContain(`${camel(entry.control)}: $('${entry.control}')`);
  });

  test('every other control of the page is one of its own (the prompt, the model, the Weights and Device menus, Analyze)', () => {
    const options = new Set(optionsWith('control').map(([, { control }]) => control));
    const others = [...byId.keys()].filter((id) => !options.has(id));
    expect(others).toEqual(['prompt', 'analyze-text', 'model', 'local-files', 'weights', 'device']);
  });

  test('a Compare column\'s settings are options of the table, and fit them', () => {
    const settings = controls.filter((control) => control['data-setting'] !== undefined);
    expect(settings.length).toBeGreaterThan(0);
    for (const control of settings) {
      const name = control['data-setting'];
      expect([name, Object.hasOwn(GENERATE_OPTIONS, name)]).toEqual([name, true]);
      expectFits(name, GENERATE_OPTIONS[name], control);
    }
  });
});

describe('the .d.ts comments name each option\'s range and default', () => {
  // interface name -> property -> its /** comment */ (one line)
  function comments(source, name) {
    const body = new RegExp(`interface ${name}\\b[^{]*\\{([\\s\\S]*?)\\n {0,2}\\}`).exec(source)[1];
    return Object.fromEntries([...body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\?:/g)]
      .map(([, text, property]) => [property, text.replace(/\n\s*\*/g, ' ').replace(/\s+/g, ' ').trim()]));
  }

  // The comment of an option names its range (or each of its values) and ends with its default.
  function expectDocumented(name, entry, comment, fallback = entry.default) {
    expect([name, comment]).toEqual([name, expect.any(String)]);
    const range = rangeWords(entry, 'FLT_MAX');
    if (range) expect([name, comment]).toEqual([name, expect.stringContaining(range)]);
    for (const value of entry.kind === 'choice' ? entry.values : []) expect([name, comment]).toEqual([name, expect.stringContaining(typeScriptValue(value))]);
    expect([name, comment]).toEqual([name, expect.stringMatching(new RegExp(`(^|; )${escapeRegExp(typeScriptDefault(name, fallback))}$`))]);
  }

  const gpt2 = read('web/lib/gpt2.d.ts');

  test.each(Object.entries(GENERATE_OPTIONS).filter(([name]) => name !== 'signal'))('GenerateOptions.%s', (name, entry) => {
    expectDocumented(name, entry, comments(gpt2, 'GenerateOptions')[name]);
  });

  test.each(Object.entries(SPECULATIVE_OPTIONS))('SpeculativeOptions.%s', (name, entry) => {
    expectDocumented(name, entry, comments(gpt2, 'SpeculativeOptions')[name]);
  });

  test.each(['topAlternatives', 'kvCache'])('ScoreOptions.%s', (name) => {
    expectDocumented(name, SCORE_OPTIONS[name], comments(gpt2, 'ScoreOptions')[name]);
  });

  // InspectOptions extends InspectGenerationOptions (generate's inspect): a list's comment ends with its doc's default
  test.each(Object.entries(INSPECT_OPTIONS))('InspectOptions.%s', (name, entry) => {
    const comment = { ...comments(gpt2, 'InspectGenerationOptions'), ...comments(gpt2, 'InspectOptions') }[name];
    if (entry.integers) expect([name, comment]).toEqual([name, expect.stringMatching(new RegExp(`; ${escapeRegExp(listDefault(entry))}( \\(.*\\))?$`))]);
    else expectDocumented(name, entry, comment);
    expect([name, Object.hasOwn(INSPECT_GENERATION_OPTIONS, name)]).toEqual([name, Object.hasOwn(comments(gpt2, 'InspectGenerationOptions'), name)]);
  });

  test('widget.d.ts: MountOptions has every generation option of the widget; one it restates has the widget\'s default', () => {
    const widget = read('web/lib/widget.d.ts');
    const own = comments(widget, 'MountOptions');
    const picked = /Pick<import\('\.\/gpt2\.js'\)\.GenerateOptions, ([^>]*)>/.exec(widget)[1].match(/'\w+'/g).map((quoted) => quoted.slice(1, -1));
    expect([...picked, ...Object.keys(own).filter((name) => WIDGET_OPTIONS.includes(name))].sort()).toEqual([...WIDGET_OPTIONS].sort());
    const defaults = completeOptions({ model: 'https://example.com/tiny.gguf' });
    for (const name of WIDGET_OPTIONS.filter((option) => own[option])) expectDocumented(name, GENERATE_OPTIONS[name], own[name], defaults[name]);
  });
});

describe('the docs\' tables', () => {
  // A markdown table's rows whose first cell names an option in backticks -> [first cell, ...cells], without backticks.
  const rows = (markdown) => markdown.split('\n').filter((line) => /^\| `/.test(line))
    .map((line) => line.slice(1, -1).split(' | ').map((cell) => cell.trim().replaceAll('`', '')));

  test('docs/api.md: each option\'s row names its range, what its edges mean, the bounds checked elsewhere, and its default', () => {
    const section = /### The options and their ranges\n([\s\S]*?)\n### /.exec(read('docs/api.md'))[1];
    const table = new Map(rows(section).map(([name, ...cells]) => [name, cells]));
    for (const [name, entry] of Object.entries(GENERATE_OPTIONS).filter(([option]) => option !== 'signal')) {
      const [range, fallback] = table.get(name) ?? [];
      expect([name, fallback?.replaceAll("'", '')]).toEqual([name, typeScriptDefault(name, entry.default).replaceAll("'", '')]);
      const words = rangeWords(entry, '3.4e38');
      if (words) expect([name, range]).toEqual([name, expect.stringContaining(words)]);
      for (const said of [entry.note, entry.also].filter(Boolean)) expect([name, range]).toEqual([name, expect.stringContaining(said)]);
      for (const value of entry.kind === 'choice' ? entry.values : []) expect([name, range]).toEqual([name, expect.stringContaining(String(value))]);
    }
  });

  test('docs/api.md: each inspect option\'s row names its range and its default', () => {
    const section = /## Inspection\n([\s\S]*?)\n## /.exec(read('docs/api.md'))[1];
    const table = new Map(rows(section).map(([name, ...cells]) => [name, cells]));
    expect([...table.keys()]).toEqual(Object.keys(INSPECT_OPTIONS));
    for (const [name, entry] of Object.entries(INSPECT_OPTIONS)) {
      const [range, fallback] = table.get(name);
      const expected = entry.integers ? listDefault(entry) : typeScriptDefault(name, entry.default).replaceAll("'", '');
      expect([name, fallback.replaceAll("'", '')]).toEqual([name, expected]);
      const words = rangeWords(entry, '3.4e38');
      if (words) expect([name, range]).toEqual([name, expect.stringContaining(words)]);
      for (const value of entry.kind === 'choice' ? entry.values : []) expect([name, range]).toEqual([name, expect.stringContaining(String(value))]);
    }
  });

  test('docs/embedding.md and public/embed.html: each generation attribute\'s row names its option and the widget\'s default', () => {
    const defaults = completeOptions({ model: 'https://example.com/tiny.gguf' });
    const markdown = new Map(rows(read('docs/embedding.md')).map(([attribute, ...cells]) => [attribute, cells]));
    const page = new Map([...read('public/embed.html').matchAll(/<tr><td><code>(data-[\w-]+)<\/code><\/td><td><code>(\w+)<\/code><\/td><td>([^<]*)<\/td>/g)]
      .map(([, attribute, name, fallback]) => [attribute, [name, fallback]]));
    for (const [name, { attribute }] of optionsWith('attribute')) {
      const expected = [name, defaultText(name, { default: defaults[name] })];
      expect([attribute, markdown.get(attribute)?.slice(0, 2)]).toEqual([attribute, expected]);
      if (page.has(attribute)) expect([attribute, page.get(attribute)]).toEqual([attribute, expected]);
    }
  });
});
