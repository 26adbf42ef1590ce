// Whether this realm is Node (not a browser, a worker or Deno's browser mode).
export const IS_NODE = typeof process === 'object' && typeof process.versions?.node === 'string';

// Node's built-in modules, for the code paths that run only in Node (file paths, the engine's .cjs glue, the core
// count). The specifier is made at run time so that bundlers (esbuild, Vite, webpack) leave these imports alone:
// bundling the API for browsers then needs no configuration, and browsers never reach these calls.
export function importNodeBuiltin(name) {
  const specifier = `node:${name}`;
  return import(/* @vite-ignore */ /* webpackIgnore: true */ specifier);
}
