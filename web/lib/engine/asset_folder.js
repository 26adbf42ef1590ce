// Where the engine's files are: the asset folder, set by configure({ assetBase }) or found from this module.
import { IS_NODE, resolveAgainstPage } from '../environment.js';

// The asset folder: the URL of the folder that holds the engine's files (gpt2.wasm, gpt2.mjs, gpt2.cjs, the
// threaded build gpt2-mt.*, and gpt2-worker.js, the engine worker as one module), i.e. a copy of public/wasm/.
// Set once per realm, before its engine or engine worker starts (configure({ assetBase }) in gpt2.js; the page
// passes its folder on to its engine workers); by default public/wasm/ seen from this module, which is right only
// while the modules are not bundled.
let configuredAssetFolder = null;
let assetFolderInUse = null;  // the folder the engine or a worker started from, after which it cannot change

// assetBase: a string or URL, relative to the page (or the worker's location) in browsers; a file: URL in Node.
export function setAssetBase(assetBase) {
  const folder = parseAssetBase(assetBase);
  if (assetFolderInUse && folder.href !== assetFolderInUse.href) {
    throw new Error(`configure: assetBase must be set before the first model loads (the engine already uses ${assetFolderInUse.href})`);
  }
  configuredAssetFolder = folder;
}

function parseAssetBase(assetBase) {
  const expected = IS_NODE ? 'a file: URL in Node' : 'an http(s) URL, absolute or relative to the page';
  const fail = () => {
    const shown = typeof assetBase === 'string' ? JSON.stringify(assetBase) : String(assetBase);
    throw new TypeError(`configure: assetBase must be the URL of the folder that holds gpt2.wasm (${expected}), got ${shown}`);
  };
  if (typeof assetBase !== 'string' && !(assetBase instanceof URL)) fail();
  let folder;
  try {
    folder = resolveAgainstPage(assetBase);
  } catch {
    fail();
  }
  if (IS_NODE ? folder.protocol !== 'file:' : !['http:', 'https:'].includes(folder.protocol)) fail();
  if (!folder.pathname.endsWith('/')) folder.pathname += '/';
  return folder;
}

// -> { folder: the asset folder's URL, configured: whether configure() set it }; from now on it cannot change.
export function useAssetFolder() {
  assetFolderInUse ??= configuredAssetFolder ?? new URL(IS_NODE ? '../../../public/wasm/' : '../../../wasm/', import.meta.url);
  return { folder: assetFolderInUse, configured: configuredAssetFolder !== null };
}

// Where a build is: the asset folder, or for the testing build build/wasm-testing/ in the repository (reachable in
// browsers only when the server's root is the repository, as for tools/bench).
export function wasmFolder(testing) {
  if (!testing) return useAssetFolder().folder;
  return new URL(IS_NODE ? '../../../build/wasm-testing/' : '../../../../build/wasm-testing/', import.meta.url);
}
