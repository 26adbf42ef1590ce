// The page's model registry (web/lib/models/model_registry.js), shared by the page and the widgets: one load and one copy
// per model, freed with its last user; abandoned loads aborted; failed loads forgotten.
import { ModelRegistry } from '../../web/lib/models/model_registry.js';

// A loader whose loads are settled by the test: load.calls[i] = { signal, onProgress, resolve, reject }.
function controlledLoad() {
  const calls = [];
  const load = (signal, onProgress) => new Promise((resolve, reject) => calls.push({ signal, onProgress, resolve, reject }));
  load.calls = calls;
  return load;
}

function fakeModel(name) {
  return { name, config: { n_ctx: 8 }, weightBytes: 1, threads: 1, disposed: 0, dispose() { this.disposed++; }, generate: () => name,
    score: (text, options) => ({ name, text, options }) };
}

test('callers of the same model share one load and one copy, which the last one to dispose frees', async () => {
  const registry = new ModelRegistry();
  const load = controlledLoad();
  const progress = [[], []];
  const first = registry.acquire('a', load, { onProgress: (event) => progress[0].push(event) });
  const second = registry.acquire('a', load, { onProgress: (event) => progress[1].push(event) });
  await Promise.resolve();
  expect(load.calls).toHaveLength(1);
  load.calls[0].onProgress({ loaded: 1 });
  expect(progress).toEqual([[{ loaded: 1 }], [{ loaded: 1 }]]);
  const model = fakeModel('a');
  load.calls[0].resolve(model);
  const [a1, a2] = await Promise.all([first, second]);
  expect(a1.generate()).toBe('a');
  expect(a1.score('x', { topAlternatives: 2 })).toEqual({ name: 'a', text: 'x', options: { topAlternatives: 2 } });
  a1.dispose();
  a1.dispose();  // once only
  expect(model.disposed).toBe(0);
  expect(() => a1.generate()).toThrow(/disposed/);
  expect(() => a1.score('x')).toThrow(/disposed/);
  a2.dispose();
  await Promise.resolve();
  expect(model.disposed).toBe(1);
  registry.acquire('a', load);  // a new load after the last user let go
  expect(load.calls).toHaveLength(2);
});

test('different keys, and the null key, are never shared', async () => {
  const registry = new ModelRegistry();
  const load = controlledLoad();
  registry.acquire('a', load);
  registry.acquire('b', load);
  registry.acquire(null, load);
  registry.acquire(null, load);
  expect(load.calls).toHaveLength(4);
});

test('one caller aborting gets an AbortError while the others keep the load; the last one aborting aborts it', async () => {
  const registry = new ModelRegistry();
  const load = controlledLoad();
  const leaving = new AbortController();
  const staying = new AbortController();
  const left = registry.acquire('a', load, { signal: leaving.signal });
  const stays = registry.acquire('a', load, { signal: staying.signal });
  leaving.abort();
  await expect(left).rejects.toMatchObject({ name: 'AbortError' });
  expect(load.calls[0].signal.aborted).toBe(false);
  staying.abort();
  await expect(stays).rejects.toMatchObject({ name: 'AbortError' });
  expect(load.calls[0].signal.aborted).toBe(true);
  const model = fakeModel('late');
  load.calls[0].resolve(model);  // a load that finished anyway is disposed
  await new Promise((resolve) => setImmediate(resolve));
  expect(model.disposed).toBe(1);
  await expect(registry.acquire('a', load, { signal: leaving.signal })).rejects.toMatchObject({ name: 'AbortError' });
});

test('a failed load fails its callers and is forgotten, so the next caller loads again', async () => {
  const registry = new ModelRegistry();
  const load = controlledLoad();
  const waiting = [registry.acquire('a', load), registry.acquire('a', load)];
  load.calls[0].reject(new Error('HTTP 500'));
  for (const promise of waiting) await expect(promise).rejects.toThrow('HTTP 500');
  const retry = registry.acquire('a', load);
  expect(load.calls).toHaveLength(2);
  load.calls[1].resolve(fakeModel('a'));
  expect((await retry).config).toEqual({ n_ctx: 8 });
});
