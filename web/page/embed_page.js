// The embedding page (public/embed.html): its snippets name where the page is actually served from (its folder
// for URLs, its origin for the CSP) and this build's integrity value of the widget script, so that they can be
// copied as they are.
import { resolveAgainstPage } from '../lib/environment.js';

const INTEGRITY_FILE = 'gpt2-widget.integrity.txt';  // written by the build beside gpt2-widget.js

const folder = resolveAgainstPage('.').href;
const integrity = await fetch(new URL(INTEGRITY_FILE, folder))
  .then((response) => (response.ok ? response.text() : Promise.reject(new Error(`HTTP ${response.status}`))))
  .then((text) => text.trim(), () => `sha384-… (see ${folder}${INTEGRITY_FILE})`);
for (const code of document.querySelectorAll('pre code')) {
  code.textContent = code.textContent
    .replaceAll('https://YOUR-HOST/', folder)
    .replaceAll('https://YOUR-HOST', location.origin)
    .replaceAll('WIDGET-INTEGRITY', integrity);
}
