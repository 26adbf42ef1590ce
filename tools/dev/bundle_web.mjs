#!/usr/bin/env node
// Builds the two bundles of web/ (esbuild, a dev dependency), part of the site build (web/CMakeLists.txt):
//   OUT/wasm/gpt2-worker.js  the engine worker (web/lib/worker/worker.js and what it imports) as one ES module, beside the
//                            wasm: what a page whose modules are bundled starts (configure({ assetBase }))
//   OUT/gpt2-widget.js       the widget (web/widget/, its widget.css inlined as text), the API and that worker's code
//                            in one classic script (IIFE): embedding it is one tag and one script request; the
//                            worker starts from a Blob of its code, so it runs on any origin
//   OUT/gpt2-widget.integrity.txt  the widget script's Subresource Integrity value (sha384-…), for embedding it
//                            with integrity="…" crossorigin="anonymous": a changed script is then refused
// usage: node tools/dev/bundle_web.mjs [OUT]    (default: public/)
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const WEB_FOLDER = fileURLToPath(new URL('../../web/', import.meta.url));
const COMMON = { bundle: true, write: false, platform: 'browser', minify: true, logLevel: 'error' };

async function bundleText(options) {
  const { build } = await import('esbuild').catch(() => {
    throw new Error('esbuild is not installed (a dev dependency): run npm ci, or tools/dev/setup.sh');
  });
  const { outputFiles } = await build({ ...COMMON, ...options });
  return outputFiles[0].text;
}

export async function bundleWeb(outFolder) {
  const worker = await bundleText({ entryPoints: [`${WEB_FOLDER}lib/worker/worker.js`], format: 'esm' });
  const widget = await bundleText({
    stdin: {
      contents: `import { startWidget } from './widget/widget.js';\nstartWidget(${JSON.stringify(worker)});\n`,
      resolveDir: WEB_FOLDER,
      sourcefile: 'gpt2-widget.js',
    },
    format: 'iife',
    loader: { '.css': 'text' },  // widget.css: the text that each widget's constructed style sheet is made of
    // import.meta is empty in a classic script: the widget always sets the asset folder and the worker's code,
    // the two things the modules would find from their own URL.
    logOverride: { 'empty-import-meta': 'silent' },
  });
  await mkdir(`${outFolder}/wasm`, { recursive: true });
  await writeFile(`${outFolder}/wasm/gpt2-worker.js`, worker);
  await writeFile(`${outFolder}/gpt2-widget.js`, widget);
  const integrity = `sha384-${createHash('sha384').update(widget).digest('base64')}`;
  await writeFile(`${outFolder}/gpt2-widget.integrity.txt`, `${integrity}\n`);
  return { workerBytes: worker.length, widgetBytes: widget.length, integrity };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outFolder = resolve(process.argv[2] ?? fileURLToPath(new URL('../../public/', import.meta.url)));
  try {
    const { workerBytes, widgetBytes, integrity } = await bundleWeb(outFolder);
    console.log(`bundle_web: ${outFolder}/gpt2-widget.js (${Math.round(widgetBytes / 1e3)} kB, integrity ${integrity}), ` +
      `wasm/gpt2-worker.js (${Math.round(workerBytes / 1e3)} kB)`);
  } catch (error) {
    console.error(`bundle_web: ${error.message}`);
    process.exit(1);
  }
}
