// The Inside the model view's live check of the KV cache: the logits of the cached step that produced the selected
// token (its sampler trace's first stage, the raw logits) against a full recompute, a fresh pass over the window up
// to it (the logit lens's last layer, which is the model's own output), with the same cache storage. The engine
// computes a position the same way in both, so they must be equal bit for bit.
import { element, scrollBox, table, tokenName } from './inside_dom.js';

// -> { identical, maxDelta, rows: [{ id, text, cached, fresh }] } over the cached step's top logits; fresh is
// undefined for a token the recompute does not rank among its top ones.
export function compareLogits(sampler, result) {
  const cached = sampler.stages.find((stage) => stage.name === 'logits').top;
  const lens = result.logitLens.at(-1).at(-1);
  const fresh = new Map(lens.map((entry) => [entry.id, entry.logit]));
  const rows = cached.map(({ id, text, value }) => ({ id, text, cached: value, fresh: fresh.get(id) }));
  const maxDelta = Math.max(...rows.map((row) => (row.fresh === undefined ? Infinity : Math.abs(row.cached - row.fresh))));
  return { identical: rows.every((row) => Object.is(row.cached, row.fresh)), maxDelta, rows };
}

// body: the panel's element; step: the selected token's step (inside_view.js); lens: as showLens takes it, its
// result over the same window as the step's pass.
export function showCheck(body, step, lens) {
  if (!step?.sampler || step.source !== 'run') {
    body.replaceChildren(element('p', 'inside-note', 'Select a token generated with this view open: the check compares the step ' +
      'that produced it, as the run computed it, with a full recompute.'));
    return;
  }
  // a step against the cache writes its one position; a prompt's pass, a slid window or a run without the cache, all
  const cached = step.kv.events.some((event) => event.kind === 'written' && event.count === 1);
  const how = cached
    ? `The step that produced ${tokenName(step.selectedText)} sent only ${tokenName(step.queryText)} through the layers, ` +
      `reading the earlier positions' keys and values from the KV cache (${step.kv.format} storage).`
    : `The pass that produced ${tokenName(step.selectedText)} fed its positions at once (the prompt's pass, a window that ` +
      'slid, or a run with the KV cache off).';
  const intro = element('p', 'inside-note', `${how} The recompute feeds positions ${step.windowStart} to ${step.query} in ` +
    'one fresh pass, as a model without a cache would. Both run the same kernels in the same order for each position, so ' +
    'the logits must be equal bit for bit.');
  if (!lens?.result || lens.windowStart !== step.windowStart) {
    body.replaceChildren(intro, element('p', 'inside-note', lens?.note ?? 'Computing…'));
    return;
  }
  const { identical, maxDelta, rows } = compareLogits(step.sampler, lens.result);
  const run = cached ? 'Cached step' : "The run's pass";
  const verdict = identical
    ? `${run} = full recompute: identical (max |Δ| 0 over the top ${rows.length} logits)`
    : `${run} ≠ full recompute: max |Δ| ${maxDelta} over the top ${rows.length} logits`;
  const caption = "The top logits of the run's step and of the recompute";
  body.replaceChildren(element('p', identical ? 'check-verdict identical' : 'check-verdict different', verdict), intro,
    scrollBox(caption, table({
      caption, head: ['Token', cached ? 'Cached step' : "Run's pass", 'Full recompute', '|Δ|'],
      rows: rows.map((row) => ({
        cells: [tokenName(row.text), exact(row.cached), row.fresh === undefined ? 'not in its top' : exact(row.fresh),
          row.fresh === undefined ? '–' : String(Math.abs(row.cached - row.fresh))],
      })),
    })));
}

// A float32 value with all the digits that tell it from its neighbours.
function exact(x) {
  return x.toPrecision(9).replace('-', '−');
}
