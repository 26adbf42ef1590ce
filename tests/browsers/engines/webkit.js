// WebKit: WebKitGTK's MiniBrowser (Debian's libwebkit2gtk-4.1-0, the engine family of Safari) on a virtual X
// display (Xvfb), driven by selenium-webdriver through WebKitWebDriver (Debian's webkit2gtk-driver).
// WebKitWebDriver has no console access: after each navigation a hook in the page records its console errors and
// uncaught errors (with those its workers leave unhandled, which reach the page; not the workers' console, nor
// anything before the page loaded), which takeErrors() reads.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { Builder, Key, error as seleniumError } from 'selenium-webdriver';
import { describeQuery, findElement, packageVersion, queryPath } from '../session.js';

const DRIVER = process.env.WEBKIT_WEBDRIVER_PATH || 'WebKitWebDriver';
const STARTUP_TIMEOUT_MS = 30_000;
// WebKitWebDriver may refuse a click on an element that is on screen with an empty ElementNotInteractable
// (measured below the fold, after scrolling): a moment later the same click goes through.
const CLICK_TRIES = 5;
const CLICK_RETRY_MS = 200;
const ERRORS_GLOBAL = '__crossBrowserErrors';

// Debian installs MiniBrowser under its multiarch folder (/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/).
function miniBrowserPath() {
  if (process.env.WEBKIT_MINIBROWSER_PATH) return process.env.WEBKIT_MINIBROWSER_PATH;
  const found = readdirSync('/usr/lib').map((folder) => `/usr/lib/${folder}/webkit2gtk-4.1/MiniBrowser`).find(existsSync);
  if (!found) throw new Error('webkit: no /usr/lib/*/webkit2gtk-4.1/MiniBrowser (Debian package libwebkit2gtk-4.1-0)');
  return found;
}

// Starts Xvfb on a display it picks -> { display: ':N', process }.
function startXvfb() {
  const xvfb = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let stderr = '';
    xvfb.stderr.on('data', (chunk) => (stderr += chunk));
    xvfb.stdio[3].once('data', (chunk) => resolve({ display: `:${String(chunk).trim()}`, process: xvfb }));
    xvfb.once('error', reject);
    xvfb.once('exit', (code) => reject(new Error(`webkit: Xvfb exited (${code}) before it picked a display: ${stderr.trim()}`)));
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitUntilServing(url, child) {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`webkit: ${DRIVER} exited (${child.exitCode})`);
    if (await fetch(`${url}/status`).then((response) => response.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`webkit: ${DRIVER} did not answer at ${url} within ${STARTUP_TIMEOUT_MS / 1000} s`);
}

// Runs in the page: records its console errors and uncaught errors in a global, once per document.
function installErrorHook(name) {
  if (window[name]) return;
  const errors = (window[name] = []);
  const consoleError = console.error;
  console.error = (...args) => {
    errors.push(`console: ${args.map(String).join(' ')}`);
    consoleError.apply(console, args);
  };
  window.addEventListener('error', (event) => errors.push(`pageerror: ${event.message}`));
  window.addEventListener('unhandledrejection', (event) => errors.push(`pageerror: ${event.reason?.message ?? event.reason}`));
}

function takePageErrors(name) {
  return window[name]?.splice(0) ?? [];
}

const stopProcess = (child) => child && child.exitCode === null && child.kill();

export async function launchWebKit() {
  const started = [];
  // Xvfb and the driver outlive a Node process that ends without closing the session (a failed run, an interrupt).
  process.once('exit', () => started.forEach(stopProcess));
  try {
    const xvfb = await startXvfb();
    started.push(xvfb.process);
    const port = await freePort();
    const driverProcess = spawn(DRIVER, [`--port=${port}`], { env: { ...process.env, DISPLAY: xvfb.display }, stdio: 'ignore' });
    started.push(driverProcess);
    const url = `http://127.0.0.1:${port}`;
    await waitUntilServing(url, driverProcess);
    const driver = await new Builder().usingServer(url).withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: miniBrowserPath(), args: ['--automation'] },
    }).build();
    return await webKitSession(driver, () => started.forEach(stopProcess));
  } catch (error) {
    started.forEach(stopProcess);
    throw error;
  }
}

async function webKitSession(driver, stopProcesses) {
  await driver.manage().window().setRect({ width: 1280, height: 1000 });
  const errors = [];
  const evaluate = async (fn, ...args) => {
    const result = await driver.executeAsyncScript(`const done = arguments[arguments.length - 1];
      Promise.resolve().then(() => (${fn})(...arguments[0]))
        .then((value) => done({ value }), (error) => done({ error: String(error && error.stack || error) }));`, args);
    if (result.error !== undefined) throw new Error(`webkit: in the page: ${result.error}`);
    return result.value;
  };
  const element = async (query) => {
    const found = await driver.executeScript(`return (${findElement})(arguments[0])`, queryPath(query));
    if (!found) throw new Error(`webkit: no element ${describeQuery(query)}`);
    return found;
  };
  return {
    engine: 'webkit',
    version: (await driver.getCapabilities()).get('browserVersion'),
    driver: `selenium-webdriver ${packageVersion('selenium-webdriver')} through WebKitWebDriver`,
    goto: async (url) => {
      errors.push(...await evaluate(takePageErrors, ERRORS_GLOBAL).catch(() => []));
      await driver.get(url);
      await evaluate(installErrorHook, ERRORS_GLOBAL);
    },
    evaluate,
    click: async (query) => {
      for (let tries = 1; ; tries++) {
        const target = await element(query);
        await driver.executeScript('arguments[0].scrollIntoView({ block: "center" })', target);
        try {
          return await target.click();
        } catch (error) {
          if (!(error instanceof seleniumError.ElementNotInteractableError) || tries === CLICK_TRIES) throw error;
          await new Promise((resolve) => setTimeout(resolve, CLICK_RETRY_MS));
        }
      }
    },
    // WebKitWebDriver drops '\n' from typed text: the Enter key types it.
    fill: async (query, text) => {
      const field = await element(query);
      await field.clear();
      await field.sendKeys(...text.split('\n').flatMap((line, i) => (i === 0 ? [line] : [Key.ENTER, line])).filter(Boolean));
    },
    takeErrors: async () => [...errors.splice(0), ...await evaluate(takePageErrors, ERRORS_GLOBAL)],
    close: async () => {
      try {
        await driver.quit();
      } finally {
        stopProcesses();
      }
    },
  };
}
