// The Inside the model view's sampler panel: how the selected token was drawn (its step's SamplerTrace, gpt2.d.ts):
// the likeliest tokens after each stage that ran, in the sampler's order, as bars, and why this token and not the
// top one.
import { formatProbability } from './tooltip.js';
import { element, formatNumber, scrollBox, table, tokenName } from './inside_dom.js';

const STAGE_LABELS = {
  logits: "Logits: the model's scores",
  logitBias: 'Logit bias',
  repetitionPenalty: 'Repetition penalty',
  presenceFrequencyPenalty: 'Presence and frequency penalties',
  noRepeatNgramSize: 'No-repeat n-grams',
  badWords: 'Banned words',
  minNewTokens: 'Min new tokens',
  greedy: 'Greedy: the likeliest token',
  topK: 'Top-k',
  temperature: 'Temperature: scores to probabilities',
  topP: 'Top-p',
  minP: 'Min-p',
  typicalP: 'Typical-p',
  distribution: 'The distribution drawn from',
};

// body: the panel's element; step: the selected token's step (inside_view.js), its sampler null where no draw was
// recorded (step.samplerNote says why).
export function showSampler(body, step) {
  if (!step?.sampler) {
    body.replaceChildren(element('p', 'inside-note', step?.samplerNote ?? 'Select a generated token.'));
    return;
  }
  const { sampler } = step;
  const ran = sampler.stages.filter((stage) => stage.ran);
  const off = sampler.stages.filter((stage) => !stage.ran).map((stage) => STAGE_LABELS[stage.name] ?? stage.name);
  body.replaceChildren(
    element('p', 'sampler-why', why(sampler)),
    element('div', 'sampler-stages', null, ...ran.map((stage) => stageTable(stage, sampler.token))),
    element('p', 'inside-note', off.length > 0 ? `Off for this run: ${off.join(', ')}.` : 'Every stage ran.'),
  );
}

// Why this token and not the top one.
function why({ stages, token, text, how, probability, draw }) {
  const name = tokenName(text);
  if (how === 'greedy') return `Greedy (temperature 0): the likeliest token, ${name}, is taken every time.`;
  const top = stages.find((stage) => stage.name === 'distribution')?.top[0];
  const drawn = draw === null ? '' : ` The draw u = ${draw.toFixed(3)}, mapped through the distribution's cumulative probabilities, landed in its share.`;
  if (!top || top.id === token) {
    return `Sampled: ${name}, probability ${formatProbability(probability)}, was also the likeliest token of the distribution drawn from.${drawn}`;
  }
  return `Sampled, not the likeliest: ${tokenName(top.text)} had probability ${formatProbability(top.value)}, ${name} ` +
    `${formatProbability(probability)}. Sampling picks each token as often as its probability says, so less likely tokens win some draws.${drawn}`;
}

// A stage's likeliest tokens as bars: probabilities as they are, logits relative to the top one's (exp(x - top):
// its probability relative to the top token's at temperature 1).
function stageTable(stage, token) {
  const top = stage.top[0]?.value ?? 0;
  const rows = stage.top.map(({ id, text, value }) => ({
    className: id === token ? 'chosen' : undefined,
    cells: [
      id === token ? `${tokenName(text)} (drawn)` : tokenName(text),
      { content: stage.values === 'probabilities' ? formatProbability(value) : formatNumber(value),
        bar: stage.values === 'probabilities' ? value : Math.exp(value - top) },
    ],
  }));
  const caption = `${STAGE_LABELS[stage.name] ?? stage.name} · ${stage.candidates} candidate${stage.candidates === 1 ? '' : 's'} left`;
  return scrollBox(caption, table({ caption, head: ['Token', stage.values === 'probabilities' ? 'Probability' : 'Logit'], rows, className: 'inside-table sampler-stage' }));
}
