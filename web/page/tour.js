// The guided tour of the Inside the model view: six steps through one generation (tokens and embeddings,
// attention, the MLP, the logit lens, the KV cache, sampling), each selecting a token, showing its panel with the
// tour's box above it, and explaining what the panel shows in the loaded model's numbers. Back, Next, End tour.
import { tokenName } from './inside_dom.js';
import { $ } from './page_state.js';

const STEPS = [
  {
    title: 'Tokens and embeddings', panel: 'tokens', pick: firstGenerated,
    text: ({ config, name }) => `GPT-2 reads text as tokens, pieces of words from a vocabulary of ${config.n_vocab}: this list ` +
      `shows the prompt's, then the generated ones. Each token's id picks a row of the embedding matrix, ${config.n_embd} ` +
      'numbers, and its position adds another: their sum is the residual stream that every layer reads and adds to. ' +
      `The selected token, ${name}, was produced by the pass at the token before it.`,
  },
  {
    title: 'Attention', panel: 'attention', pick: firstGenerated,
    text: ({ config }) => `In each of the ${config.n_layer} layers, ${config.n_head} attention heads let a token gather what it needs ` +
      "from the tokens before it, never after. A head compares the token's query with every earlier key, turns the scores into " +
      'weights that add up to 1, and sums those positions\' values with them. The small pictures show every layer and head at once; ' +
      'the lines show where the chosen head looks.',
  },
  {
    title: 'The MLP', panel: 'blocks', pick: firstGenerated,
    text: ({ config }) => `After attention, each layer's MLP, a network of ${4 * config.n_embd} hidden units, works on this position ` +
      'alone: much of what the model knows about words is stored in its weights. Attention and MLP each add their output to the ' +
      'residual stream; the table shows how much every layer changed it.',
  },
  {
    title: 'The logit lens', panel: 'lens', pick: firstGenerated,
    text: ({ config }) => `The final layer norm and the LM head turn the residual stream into a score for each of the ${config.n_vocab} ` +
      'tokens. Applied after every layer instead of only the last, they show the prediction forming: early layers often guess a ' +
      'common token, later ones the token that came (✓).',
  },
  {
    title: 'The KV cache', panel: 'kv', pick: lastGenerated,
    text: () => 'Attention needs the key and value of every earlier token. The KV cache keeps them, so each new token goes through ' +
      'the layers alone and reads the rest from memory: one position\'s work per step instead of the whole text\'s. The check ' +
      "below the strip compares a cached step's logits with a full recompute: they are identical.",
  },
  {
    title: 'Sampling', panel: 'sampler', pick: (tokens) => sampledNotTop(tokens) ?? firstGenerated(tokens),
    text: () => "The last layer's scores, the logits, become probabilities at the temperature, top-k and top-p keep the likeliest " +
      'tokens, and the sampler draws one in proportion to its probability. At temperature 0 it takes the likeliest; otherwise a less ' +
      'likely token sometimes wins, as this step shows when its drawn token is not the top one.',
  },
];

// view: { select(position), open(), tokens() -> { ids, texts, generatedFrom, pieces }, config() -> the model's }
export function wireTour(view) {
  const nodes = {
    start: $('tour-start'), box: $('tour'), count: $('tour-count'), heading: $('tour-heading'), text: $('tour-text'),
    back: $('tour-back'), next: $('tour-next'), end: $('tour-end'), panels: $('inside-panels'),
  };
  let index = -1;
  // Moving the box takes the focus away: it goes back to the button pressed, or to Next or Back where that one is
  // disabled now.
  const go = (to, focus) => {
    index = to;
    showStep(nodes, view, STEPS[index], index);
    (focus.disabled ? [nodes.next, nodes.back].find((button) => !button.disabled) : focus).focus();
  };
  nodes.start.addEventListener('click', () => {
    view.open();
    nodes.box.hidden = false;
    go(0, nodes.heading);
  });
  nodes.back.addEventListener('click', () => go(Math.max(0, index - 1), nodes.back));
  nodes.next.addEventListener('click', () => go(Math.min(STEPS.length - 1, index + 1), nodes.next));
  nodes.end.addEventListener('click', () => {
    index = -1;
    nodes.box.hidden = true;
    nodes.panels.querySelector('.tour-current')?.classList.remove('tour-current');
    nodes.panels.before(nodes.box);
    nodes.start.focus();
  });
}

function showStep(nodes, view, step, index) {
  const tokens = view.tokens();
  const position = step.pick(tokens);
  view.select(position);
  const panel = nodes.panels.querySelector(`[data-panel="${step.panel}"]`);
  nodes.panels.querySelector('.tour-current')?.classList.remove('tour-current');
  panel.classList.add('tour-current');
  panel.before(nodes.box);
  nodes.count.textContent = `Step ${index + 1} of ${STEPS.length}`;
  nodes.heading.textContent = step.title;
  nodes.text.textContent = step.text({ config: view.config(), name: tokenName(tokens.texts[position]) });
  nodes.back.disabled = index === 0;
  nodes.next.disabled = index === STEPS.length - 1;
  nodes.box.scrollIntoView({ block: 'start' });
}

function firstGenerated({ generatedFrom }) {
  return generatedFrom;
}

function lastGenerated({ ids }) {
  return ids.length - 1;
}

// The first generated token whose recorded draw was not the likeliest token, or undefined.
function sampledNotTop({ pieces }) {
  for (const [position, piece] of pieces) {
    const sampler = piece.inspection?.sampler;
    const top = sampler?.stages.find((stage) => stage.name === 'distribution')?.top[0];
    if (top && top.id !== sampler.token) return position;
  }
  return undefined;
}
