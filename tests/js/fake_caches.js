// An in-memory stand-in for the browser's Cache API (downloads.test.js, stored_models.test.js), installed as
// globalThis.caches: url -> { body, headers }. A put reads its body to the end and stores nothing if the body
// errors, as browsers do; refusePut(url) makes a put fail like a full quota; keys() gives the stored URLs'
// Requests in the order they were first stored. -> the Map of what is stored, for the tests to read or damage;
// the caller deletes globalThis.caches when done.
export function useFakeCaches({ refusePut = () => false } = {}) {
  const stored = new Map();
  globalThis.caches = {
    open: async () => ({
      match: async (url) => (stored.has(url) ? new Response(stored.get(url).body, { headers: stored.get(url).headers }) : undefined),
      put: async (url, response) => {
        if (refusePut(url)) {
          await response.body?.cancel();
          throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
        }
        const body = new Uint8Array(await response.arrayBuffer());
        stored.set(url, { body, headers: Object.fromEntries(response.headers) });
      },
      delete: async (url) => stored.delete(url),
      keys: async () => [...stored.keys()].map((url) => new Request(url)),
    }),
  };
  return stored;
}
