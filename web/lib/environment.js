// Where this code runs, and what that realm gives it: Node or a browser (a page or a worker), Node's built-in
// modules, and the address that relative URLs are read against.

// Whether this realm is Node (not a browser, a worker or Deno's browser mode).
export const IS_NODE = typeof process === 'object' && typeof process.versions?.node === 'string';

// Whether this realm is a browser page (not a worker or Node): where loadModel puts models in a worker.
export const IS_PAGE = typeof window !== 'undefined';

// Node's built-in modules, for the code paths that run only in Node (file paths, the engine's .cjs glue, the core
// count). The specifier is made at run time so that bundlers (esbuild, Vite, webpack) leave these imports alone:
// bundling the API for browsers then needs no configuration, and browsers never reach these calls.
export function importNodeBuiltin(name) {
  const specifier = `node:${name}`;
  return import(/* @vite-ignore */ /* webpackIgnore: true */ specifier);
}

// An npm package that may be installed beside this one (Node), imported with a specifier made at run time for the
// same reason; rejects when it is not there.
export function importOptionalPackage(name) {
  return import(/* @vite-ignore */ /* webpackIgnore: true */ `${name}`);
}

// A URL as given (a string or URL): relative to the page's (or the worker's) address in browsers, absolute in
// Node. A TypeError when it is not a URL.
export function resolveAgainstPage(text) {
  return new URL(text, globalThis.document?.baseURI ?? globalThis.location?.href);
}
