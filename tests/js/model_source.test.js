// A model source is decided once, where loadModel (or the CLI) receives it (web/lib/loading/model_source.js): each
// form loadModel takes becomes one kind of plain data, which survives postMessage to the engine worker, and what
// errors and the device probe call it follows from its kind alone.
import { describe, expect, test } from '@jest/globals';
import { deviceChoiceKey } from '../../web/lib/gpu/device_probe.js';
import { byKind, isStringOrUrl, modelSource, sourceIdentity, sourceName } from '../../web/lib/loading/model_source.js';

const file = (name, size) => Object.assign(new Blob([new Uint8Array(size)]), { name, lastModified: 7 });

describe('modelSource: each form loadModel takes, as one kind', () => {
  test('an http(s) URL, as a string or a URL, is a url of its absolute href', () => {
    expect(modelSource('https://example.com/models/gpt2/')).toEqual({ kind: 'url', url: 'https://example.com/models/gpt2/' });
    expect(modelSource(new URL('HTTP://Example.com/m.gguf'))).toEqual({ kind: 'url', url: 'http://example.com/m.gguf' });
  });

  test('in Node, any other string or URL is a path, kept as given (a file: URL is read as its path when opened)', () => {
    expect(modelSource('public/models/tiny-shakespeare/')).toEqual({ kind: 'path', path: 'public/models/tiny-shakespeare/' });
    expect(modelSource(new URL('file:///tmp/m.gguf'))).toEqual({ kind: 'path', path: 'file:///tmp/m.gguf' });
  });

  test('an array of files is a list, copied; one File, Blob, ArrayBuffer or typed array alone is one file', () => {
    const list = [file('config.json', 3), file('model.safetensors', 5)];
    const source = modelSource(list);
    expect(source).toEqual({ kind: 'files', files: list });
    expect(source.files).not.toBe(list);
    for (const one of [file('m.gguf', 4), new ArrayBuffer(4), new Uint8Array(4)]) expect(modelSource(one)).toEqual({ kind: 'file', file: one });
  });

  test('any other object is the folder\'s files by part: { config, weights, vocab, merges }', () => {
    const parts = { config: '{}', weights: new ArrayBuffer(8) };
    expect(modelSource(parts)).toEqual({ kind: 'parts', parts });
  });

  test('anything else is a TypeError naming it', () => {
    for (const value of [undefined, null, 42, true]) {
      expect(() => modelSource(value)).toThrow(new TypeError(`loadModel: unsupported model source ${String(value)} (a URL, a folder path or files)`));
    }
  });

  test('a source is plain data: a structured clone (postMessage) is the same source', () => {
    for (const value of ['https://example.com/m/', 'models/m', [new Uint8Array(3)], new ArrayBuffer(2), { config: '{}' }]) {
      const source = modelSource(value);
      const received = structuredClone(source);
      expect(received).toEqual(source);
      expect(sourceIdentity(received)).toEqual(sourceIdentity(source));
    }
  });
});

describe('what a source is called', () => {
  const list = [file('config.json', 3), file('model.safetensors', 5)];

  test('errors name its URL or path, or its files', () => {
    expect(sourceName(modelSource('https://example.com/m/'))).toBe('https://example.com/m/');
    expect(sourceName(modelSource('models/m'))).toBe('models/m');
    expect(sourceName(modelSource(list))).toBe('config.json, model.safetensors');
    expect(sourceName(modelSource(new Uint8Array(1 << 20)))).toBe('a file');
    expect(sourceName(modelSource({ config: list[0], weights: new ArrayBuffer(1) }))).toBe('config.json, a file');
  });

  test('the device probe remembers it by URL or path, and files by name, size and date', () => {
    expect(deviceChoiceKey(modelSource('https://example.com/m/'), 'int8')).toBe(JSON.stringify(['https://example.com/m/', 'int8']));
    expect(deviceChoiceKey(modelSource('models/m'), 'fp32')).toBe(JSON.stringify(['models/m', 'fp32']));
    expect(sourceIdentity(modelSource(list))).toEqual([['file', 'config.json', 3, 7], ['file', 'model.safetensors', 5, 7]]);
    expect(sourceIdentity(modelSource(new ArrayBuffer(6)))).toEqual([['model', null, 6, null]]);
    expect(sourceIdentity(modelSource({ config: '{"a":1}', weights: list[1] }))).toEqual([['config', null, 7, null], ['weights', 'model.safetensors', 5, 7]]);
  });

  test('a value that modelSource did not make is refused, not guessed at', () => {
    const kinds = { url: () => 'url' };
    expect(byKind(modelSource('https://example.com/m/'), kinds)).toBe('url');
    expect(() => byKind('https://example.com/m/', kinds)).toThrow(new TypeError('not a model source (modelSource makes one): https://example.com/m/'));
  });

  test('isStringOrUrl: the forms written as a URL or path', () => {
    expect([isStringOrUrl('a'), isStringOrUrl(new URL('https://a/')), isStringOrUrl({ href: 'https://a/' }), isStringOrUrl(null)]).toEqual([true, true, false, false]);
  });
});
