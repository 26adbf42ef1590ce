// A Session (../session.js) over puppeteer-core: Firefox through WebDriver BiDi, Chromium through the DevTools
// protocol. Both protocols report the console of the page and of its workers, and uncaught errors.
import puppeteer from 'puppeteer-core';
import { describeQuery, findElement, packageVersion, queryPath } from '../session.js';

export const PUPPETEER = `puppeteer-core ${packageVersion('puppeteer-core')}`;

// engine: the Session's name; driver: how it is driven, in words; launchOptions: puppeteer.launch's.
export async function launchPuppeteerSession({ engine, driver, launchOptions }) {
  const browser = await puppeteer.launch(launchOptions);
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('console', (message) => message.type() === 'error' && errors.push(`console: ${message.text()}`));
    page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
    const element = async (query) => {
      const handle = (await page.evaluateHandle(findElement, queryPath(query))).asElement();
      if (!handle) throw new Error(`${engine}: no element ${describeQuery(query)}`);
      return handle;
    };
    return {
      engine,
      version: (await browser.version()).split('/').at(-1),  // 'firefox/153.8.0', 'Chrome/156.0.8078.129'
      driver,
      goto: async (url) => {
        await page.goto(url, { waitUntil: 'load' });
      },
      evaluate: (fn, ...args) => page.evaluate(`(${fn})(...${JSON.stringify(args)})`),
      click: async (query) => (await element(query)).click(),
      fill: async (query, text) => {
        const field = await element(query);
        await field.evaluate((input) => (input.value = ''));
        await field.type(text);
      },
      takeErrors: async () => errors.splice(0),
      close: () => browser.close(),
    };
  } catch (error) {
    await browser.close();
    throw error;
  }
}
