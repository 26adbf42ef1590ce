// End-to-end tests of the page's Analyze text mode: each token of a pasted text coloured by the rank the model
// gave it (GLTR's buckets: top 10, top 100, top 1000, beyond), the tooltip with its probability, rank and the
// five likeliest alternatives (mouse and keyboard), the perplexity, and colours that stay readable and apart
// for colour-blind readers in both colour schemes. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../../web/lib/gpt2.js';
import { COLOUR_VISION, contrastRatio, parseColour, perceivedDifference } from './colours.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
// Shakespeare the model has learnt, then words it cannot expect: tokens in every rank bucket.
const KNOWN_TEXT = 'ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n' +
  'JULIET:\nThe quantum spreadsheet compiles my xylophone.';
const BUCKETS = [
  { className: 'rank-top-10', maxRank: 10, label: 'top 10' },
  { className: 'rank-top-100', maxRank: 100, label: 'top 100' },
  { className: 'rank-top-1000', maxRank: 1000, label: 'top 1000' },
  { className: 'rank-beyond', maxRank: Infinity, label: 'beyond the top 1000' },
];
const bucketOf = (rank) => BUCKETS.find((bucket) => rank <= bucket.maxRank);
const MODEL_READY_TIMEOUT = 90_000;
const MIN_CONTRAST = 4.5;  // WCAG AA for normal text
const MIN_DIFFERENCE = 15;  // CIE76 ΔE: clearly different colours (about 2.3 is just noticeable)

// The Node API's scores of KNOWN_TEXT with the bundled GGUF file, which the page must show.
let nodeScores;
test.beforeAll(async () => {
  const model = await loadModel(BUNDLED_GGUF_FILE);
  try {
    nodeScores = await model.score(KNOWN_TEXT, { topAlternatives: 5 });
  } finally {
    model.dispose();
  }
});

function analyzeControls(page) {
  return {
    analyzeMode: page.getByRole('radio', { name: 'Analyze text' }),
    generateMode: page.getByRole('radio', { name: 'Generate' }),
    text: page.getByRole('textbox', { name: 'Text to analyze' }),
    analyze: page.getByRole('button', { name: 'Analyze' }),
    analysis: page.getByRole('region', { name: 'Analysis' }),
    tokens: page.locator('#analysis-text .token'),
    tooltip: page.getByRole('tooltip'),
  };
}

// Opens the page in Analyze text mode and analyzes KNOWN_TEXT.
async function analyzeKnownText(page) {
  const controls = analyzeControls(page);
  await page.goto('/');
  await controls.analyzeMode.check();
  await controls.text.fill(KNOWN_TEXT);
  await expect(controls.analyze).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await controls.analyze.click();
  await expect(controls.tokens).toHaveCount(nodeScores.tokens.length, { timeout: MODEL_READY_TIMEOUT });
  return controls;
}

const formatProbability = (logprob) => {
  const probability = Math.exp(logprob);
  return probability >= 0.01 ? probability.toFixed(2) : probability.toExponential(1).replace('e-', 'e−');
};

test('Analyze text colours each token by the rank the Node API gives it, and shows the perplexity and the counts', async ({ page }) => {
  const { generateMode, analysis, tokens, text } = await analyzeKnownText(page);
  const expectedBuckets = nodeScores.tokens.map((token) => bucketOf(token.rank).className);
  expect(new Set(expectedBuckets).size).toBe(BUCKETS.length);  // the text shows every colour

  expect((await tokens.allTextContents()).join('')).toBe(KNOWN_TEXT);
  const shownBuckets = await tokens.evaluateAll((spans) => spans.map((span) => [...span.classList].find((name) => name.startsWith('rank-'))));
  expect(shownBuckets).toEqual(expectedBuckets);
  await expect(analysis.getByRole('definition').first()).toHaveText(nodeScores.perplexity.toFixed(2));
  await expect(analysis.getByRole('definition').nth(1)).toHaveText(String(nodeScores.tokens.length));
  const topTen = expectedBuckets.filter((name) => name === 'rank-top-10').length;
  await expect(page.locator('#count-top-10')).toHaveText(new RegExp(`^${topTen} tokens? \\(\\d+ %\\)$`));

  // Back to Generate: the prompt and its output, while the analysis waits for the next visit.
  await generateMode.check();
  await expect(page.getByRole('textbox', { name: 'Prompt' })).toBeVisible();
  await expect(text).toBeHidden();
  await expect(analysis).toBeHidden();
  await page.getByRole('radio', { name: 'Analyze text' }).check();
  await expect(tokens).toHaveCount(nodeScores.tokens.length);
});

test('hovering or focusing an analyzed token shows its probability, its rank and the five likeliest alternatives', async ({ page }) => {
  const { tokens, tooltip } = await analyzeKnownText(page);
  // A visible token the model did not expect: its rank is past the top 10, so the alternatives are others.
  const index = nodeScores.tokens.findIndex((token) => token.rank > 10 && /\S/.test(token.text));
  const expected = nodeScores.tokens[index];
  await tokens.nth(index).hover();
  await expect(tooltip).toBeVisible();
  await expect(tooltip).toContainText(`p = ${formatProbability(expected.logprob)}`);
  await expect(tooltip).toContainText(`Rank ${expected.rank}: ${bucketOf(expected.rank).label}`);
  const items = tooltip.getByRole('listitem');
  await expect(items).toHaveCount(5);
  for (const [i, alternative] of expected.alternatives.entries()) {
    await expect(items.nth(i)).toContainText(formatProbability(alternative.logprob));
  }
  await expect(tooltip.locator('li.chosen')).toHaveCount(0);

  await page.mouse.move(0, 0);
  await expect(tooltip).toBeHidden();
  // One Tab stop for the text, then the arrow keys, Home and End, as in the generated output.
  await page.getByRole('button', { name: 'Analyze' }).focus();
  await page.keyboard.press('Tab');
  await expect(tokens.first()).toBeFocused();
  await expect(tooltip).toBeVisible();
  await expect(tooltip).toContainText(`Rank ${nodeScores.tokens[0].rank}: `);
  await page.keyboard.press('ArrowRight');
  await expect(tokens.nth(1)).toBeFocused();
  await expect(tokens.nth(1)).toHaveAttribute('aria-describedby', 'token-tooltip');
  await expect(tooltip).toContainText(`Rank ${nodeScores.tokens[1].rank}: `);
  await page.keyboard.press('End');
  await expect(tokens.last()).toBeFocused();
  await expect(tooltip.getByRole('listitem')).toHaveCount(5);
  await page.keyboard.press('Escape');
  await expect(tooltip).toBeHidden();
});

for (const colorScheme of ['light', 'dark']) {
  test(`in the ${colorScheme} scheme, text on each rank colour has a contrast of at least 4.5, and the colours stay apart for colour-blind readers`, async ({ page }) => {
    await page.emulateMedia({ colorScheme });
    const { tokens } = await analyzeKnownText(page);
    const styles = await page.locator('.rank-sample').evaluateAll((samples) => samples.map((sample) => {
      const style = getComputedStyle(sample);
      return { className: sample.classList[1], background: style.backgroundColor, text: style.color, underline: `${style.textDecorationLine} ${style.textDecorationStyle}` };
    }));
    expect(styles.map((style) => style.className)).toEqual(BUCKETS.map((bucket) => bucket.className));
    for (const { background, text } of styles) {
      expect(contrastRatio(parseColour(text), parseColour(background))).toBeGreaterThanOrEqual(MIN_CONTRAST);
    }
    for (const vision of Object.keys(COLOUR_VISION)) {
      for (const [i, first] of styles.entries()) {
        for (const second of styles.slice(i + 1)) {
          const difference = perceivedDifference(parseColour(first.background), parseColour(second.background), vision);
          expect(difference, `${first.className} and ${second.className} with ${vision}`).toBeGreaterThanOrEqual(MIN_DIFFERENCE);
        }
      }
    }
    // Without colour, the underline tells the buckets apart.
    expect(new Set(styles.map((style) => style.underline)).size).toBe(BUCKETS.length);
    // The tokens use the legend's colours and underlines.
    for (const { className, background, underline } of styles) {
      const token = tokens.and(page.locator(`.${className}`)).first();
      await expect(token).toHaveCSS('background-color', background);
      await expect(token).toHaveCSS('text-decoration-line', underline.split(' ')[0]);
    }
  });
}

test('analyzing an empty text asks for one', async ({ page }) => {
  const { analyzeMode, analyze, text } = analyzeControls(page);
  await page.goto('/');
  await analyzeMode.check();
  await expect(analyze).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await analyze.click();
  await expect(page.getByRole('alert')).toHaveText('Text to analyze: paste or type a text first.');
  await expect(text).toBeFocused();
});
