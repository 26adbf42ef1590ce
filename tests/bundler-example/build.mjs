#!/usr/bin/env node
// Builds the example app with esbuild into OUT: index.html and main.js, one ES module holding main.js and
// gpt2-wasm. 'gpt2-wasm' resolves through package.json's exports, from node_modules where the package is
// installed, and here as the repository's own name. No other configuration: the package's Node-only imports are
// invisible to bundlers (web/lib/environment.js). The wasm files are not part of the build: the app's
// configure({ assetBase }) names where a copy of public/wasm/ is served.
// usage: node tests/bundler-example/build.mjs OUT
import { build } from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const EXAMPLE_FOLDER = fileURLToPath(new URL('./', import.meta.url));

export async function buildExample(outFolder) {
  await mkdir(outFolder, { recursive: true });
  await build({
    entryPoints: [`${EXAMPLE_FOLDER}main.js`],
    outfile: `${outFolder}/main.js`,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    logLevel: 'error',
  });
  await copyFile(`${EXAMPLE_FOLDER}index.html`, `${outFolder}/index.html`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error('usage: node tests/bundler-example/build.mjs OUT');
    process.exit(1);
  }
  await buildExample(resolve(process.argv[2]));
}
