// Chromium (Debian's chromium, as the Playwright suites run it), headless, driven by puppeteer-core over the
// DevTools protocol.
import { launchPuppeteerSession, PUPPETEER } from './puppeteer.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export function launchChromium() {
  return launchPuppeteerSession({
    engine: 'chromium',
    driver: `${PUPPETEER} over the DevTools protocol`,
    launchOptions: {
      browser: 'chrome',
      executablePath: CHROMIUM,
      headless: true,
      // the wasm project's flags (playwright.config.js): no GPU, nothing fetched from the network
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    },
  });
}
