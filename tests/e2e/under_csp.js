// The e2e suites' `test` and `expect`: Playwright's, with the site's Content-Security-Policy enforced on every
// test. tools/dev/serve.mjs sends the policy with a report-uri, so the browser reports each violation, in a page or
// in its workers, to the server; a test fails when the site's server received a report while it ran. A test
// that breaks the policy on purpose names what it expects to be blocked: cspViolations.expect(/pattern/) (matched
// against the report's JSON), then awaits cspViolations.reported().
import { test as base, expect } from '@playwright/test';
import { CSP_REPORTS_PATH } from '../../tools/dev/serve.mjs';

// Reports are posted by the browser shortly after the violation: time for the last ones to arrive, and, while an
// expected one is still missing, as long again as needed up to a limit (a loaded machine posts them later). A
// report still queued when its page closes can be lost, so a test that expects violations waits for their reports
// (cspViolations.reported()) before it ends.
const REPORT_DELAY_MS = 300;
const EXPECTED_REPORT_WAIT_MS = 15000;

export const test = base.extend({
  cspViolations: [async ({ baseURL }, use) => {
    const reportsUrl = new URL(CSP_REPORTS_PATH, baseURL);
    const reports = async () => (await fetch(reportsUrl)).json();
    const before = (await reports()).length;
    const expected = [];
    const received = [];
    // Polls the server's reports into `received` until every expected one is there, or the limit.
    const collect = async () => {
      for (let waited = 0; ; waited += REPORT_DELAY_MS) {
        await new Promise((resolve) => setTimeout(resolve, REPORT_DELAY_MS));
        received.splice(0, received.length, ...(await reports()).slice(before).map((report) => JSON.stringify(report)));
        const missing = expected.some((pattern) => !received.some((report) => pattern.test(report)));
        if (!missing || waited >= EXPECTED_REPORT_WAIT_MS) return;
      }
    };
    await use({ expect: (pattern) => expected.push(pattern), reported: collect });
    await collect();
    expect(received.filter((report) => !expected.some((pattern) => pattern.test(report))), 'Content-Security-Policy violations').toEqual([]);
    for (const pattern of expected) expect(received.some((report) => pattern.test(report)), `a violation matching ${pattern}`).toBe(true);
  }, { auto: true }],
});

export { expect };
