// The driver layer that the cross-browser flows (flows.js) are written against: one browser tab, driven the way a
// person drives it (real clicks and keystrokes), whatever the engine and its driver. Each engine's adapter
// (engines/*.js) launches its browser and returns a Session:
//   engine            'chromium', 'firefox' or 'webkit'
//   version           the browser's own version ('153.8.0')
//   driver            how it is driven, in words (the docs' support table names it)
//   goto(url)         navigates the tab and waits for the page's load event
//   evaluate(fn, ...args)  runs fn (a self-contained function, or its source) in the page with JSON arguments,
//                     awaits its result -> the result, JSON-cloned
//   click(query)      scrolls the element into view and clicks its centre
//   fill(query, text) empties a text field and types text into it ('\n' as the Enter key)
//   takeErrors()      -> the console errors ('console: …') and uncaught errors ('pageerror: …') seen since the last
//                     call, the workers' included, as far as the driver sees them (engines/webkit.js: not the
//                     workers' console, nor anything before the page loaded)
//   close()           ends the browser and whatever the adapter started for it
// A query names an element: a CSS selector, or a list of them, each after the first matched inside the shadow root
// of the element before it (['gpt2-widget', '.generate']: the widget's Generate button).

import { readFileSync } from 'node:fs';

// The installed version of an npm package of the repository ('24.43.1').
export function packageVersion(name) {
  return JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
}

// Runs in the page: the element a query names, or null.
export function findElement(path) {
  let node = document;
  for (const [i, selector] of path.entries()) {
    node = (i === 0 ? node : node?.shadowRoot)?.querySelector(selector) ?? null;
    if (!node) return null;
  }
  return node;
}

export const queryPath = (query) => (Array.isArray(query) ? query : [query]);
export const describeQuery = (query) => queryPath(query).join(' >>> ');

const POLL_MS = 100;

// Polls fn(...args) in the page until it returns something truthy, or timeoutMs -> that value; on the timeout
// throws naming what was awaited and what fn last gave.
export async function waitFor(session, what, timeoutMs, fn, ...args) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await session.evaluate(fn, ...args);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${session.engine}: no ${what} after ${timeoutMs / 1000} s (last: ${JSON.stringify(value)})`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

// The source of a function (path, ...args) => fn(element, ...args), for evaluate: fn gets the element that the
// query path names (null if none).
export function onElement(fn) {
  return `(path, ...args) => (${fn})((${findElement})(path), ...args)`;
}

// The element's state -> { exists, text, value, disabled, visible, checked }.
export function elementState(session, query) {
  return session.evaluate(onElement((element) => {
    if (!element) return { exists: false };
    const { width, height } = element.getBoundingClientRect();
    return {
      exists: true, text: element.textContent, value: element.value ?? null, disabled: Boolean(element.disabled),
      visible: width > 0 && height > 0, checked: Boolean(element.checked),
    };
  }), queryPath(query));
}
