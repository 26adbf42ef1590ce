// The Inside the model view's block contributions: for the pass that produced the selected token, how much each
// layer's attention and MLP added to the residual stream (L2 norms, with bars), the stream's norm after the layer,
// and each head's query, key and value norms.
import { element, formatNumber, scrollBox, table, tokenName } from './inside_dom.js';

// body: the panel's element; step: the selected token's step (inside_view.js); config: the model's.
export function showBlocks(body, step, config) {
  if (!step?.inspection) {
    body.replaceChildren(element('p', 'inside-note', step?.pending ?? 'Select a token after the first.'));
    return;
  }
  const { layers, heads, blocks } = step.inspection;
  body.replaceChildren(
    element('p', 'inside-note', `Each layer adds two things to the residual stream of ${tokenName(step.queryText)}, a vector of ` +
      `${config.n_embd} numbers: what its attention gathered from earlier tokens, then what its MLP (a network of ` +
      `${4 * config.n_embd} hidden units, applied to this position alone) computed from the result. The bars compare the ` +
      'layers: how much each one changed the vector, and how long it is afterwards.'),
    normsTable(layers, blocks),
    headsTable(layers, heads, blocks),
  );
}

function normsTable(layers, blocks) {
  const columns = ['attention', 'mlp', 'residual'];
  const largest = columns.map((key) => Math.max(...blocks.map((block) => block[0][key])));
  const rows = layers.map((layer, l) => ({
    cells: [`Layer ${layer}`, ...columns.map((key, c) => ({ content: formatNumber(blocks[l][0][key]), bar: blocks[l][0][key] / largest[c] }))],
  }));
  const caption = 'L2 norms of what each layer added, and of the residual stream after it';
  return scrollBox(caption, table({ caption, head: ['Layer', 'Attention added', 'MLP added', 'Residual after'], rows }));
}

function headsTable(layers, heads, blocks) {
  const rows = layers.map((layer, l) => ({
    cells: [`Layer ${layer}`, ...blocks[l][0].heads.map(({ query, key, value }) => `q ${formatNumber(query)} · k ${formatNumber(key)} · v ${formatNumber(value)}`)],
  }));
  const caption = "Each head's query, key and value norms at this position";
  return scrollBox(caption, table({ caption, head: ['Layer', ...heads.map((head) => `Head ${head}`)], rows }));
}
