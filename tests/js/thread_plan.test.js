// How many threads a model asks its engine for, and why one (web/lib/engine/threads.js): the reasons a browser realm
// gives, from its globals (stubbed here), and the plan for each `threads` option in Node.
import { availableParallelism } from 'node:os';
import { MAX_AUTO_THREADS, planThreads, resolveThreads, threadsUnavailableReason } from '../../web/lib/engine/threads.js';

test('a browser realm that is not cross-origin isolated, or isolated without SharedArrayBuffer (WebKit), says which', () => {
  expect(threadsUnavailableReason({ crossOriginIsolated: false, SharedArrayBuffer })).toBe('the page is not cross-origin isolated');
  expect(threadsUnavailableReason({ SharedArrayBuffer })).toBe('the page is not cross-origin isolated');
  expect(threadsUnavailableReason({ crossOriginIsolated: false })).toBe('the page is not cross-origin isolated');
  expect(threadsUnavailableReason({ crossOriginIsolated: true })).toBe('the browser gives no SharedArrayBuffer');
  expect(threadsUnavailableReason({ crossOriginIsolated: true, SharedArrayBuffer: undefined })).toBe('the browser gives no SharedArrayBuffer');
  expect(threadsUnavailableReason({ crossOriginIsolated: true, SharedArrayBuffer })).toBeNull();
});

test('in Node a count is taken as asked, without a reason, and auto is the cores the process may use', async () => {
  expect(await planThreads(1)).toEqual({ threads: 1, reason: null });
  expect(await planThreads(3)).toEqual({ threads: 3, reason: null });
  const cores = Math.min(availableParallelism(), MAX_AUTO_THREADS);
  expect(await planThreads('auto')).toEqual({ threads: cores, reason: cores === 1 ? 'one core' : null });
  expect(await resolveThreads('auto')).toBe(cores);
  await expect(planThreads(0)).rejects.toThrow(/^threads must be "auto" or an integer from 1 to 16, got 0$/);
});
