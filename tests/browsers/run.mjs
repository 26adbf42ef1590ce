#!/usr/bin/env node
// The cross-browser suite: the page's and the widget's main flows (flows.js) in Firefox and in WebKit, one browser
// per engine, one engine after the other, and Chromium's load of the page for the docs' support table (the
// Playwright suites run every flow in Chromium). Exits non-zero if any flow fails. Run after `bash tools/dev/build.sh`.
// usage: node tests/browsers/run.mjs [ENGINE…]    (chromium, firefox, webkit; all of them by default; chromium named
//        alone or with others runs its full flows too)
import { after } from 'node:test';
import { launchChromium } from './engines/chromium.js';
import { launchFirefox } from './engines/firefox.js';
import { launchWebKit } from './engines/webkit.js';
import { describeEngine } from './flows.js';
import { startServers } from './servers.js';

const ENGINES = { chromium: launchChromium, firefox: launchFirefox, webkit: launchWebKit };

const named = process.argv.slice(2);
const unknown = named.filter((name) => !(name in ENGINES));
if (unknown.length) {
  console.error(`run.mjs: unknown engines ${unknown.join(', ')} (use ${Object.keys(ENGINES).join(', ')})`);
  process.exit(2);
}

const servers = await startServers();
after(() => servers.close());
for (const name of named.length ? named : Object.keys(ENGINES)) {
  const only = !named.length && name === 'chromium' ? 'report' : undefined;
  describeEngine(name, ENGINES[name], servers, { only });
}
