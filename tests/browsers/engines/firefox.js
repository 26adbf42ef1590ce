// Firefox (Debian's firefox-esr), headless, driven by puppeteer-core over WebDriver BiDi.
import { launchPuppeteerSession, PUPPETEER } from './puppeteer.js';

const FIREFOX = process.env.FIREFOX_PATH || '/usr/bin/firefox-esr';

export function launchFirefox() {
  return launchPuppeteerSession({
    engine: 'firefox',
    driver: `${PUPPETEER} over WebDriver BiDi`,
    launchOptions: { browser: 'firefox', executablePath: FIREFOX, headless: true, protocol: 'webDriverBiDi' },
  });
}
