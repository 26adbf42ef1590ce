// The Inside the model view's list of tokens (the prompt's, then the generated ones): one Tab stop, the arrow keys
// (and Home, End) move the selection, a click selects; the selected token and the one whose pass produced it are
// marked.
import { element, tokenName } from './inside_dom.js';

export class TokenStrip {
  #list;
  #onSelect;
  #options = [];  // by position: the option elements shown

  // list: the listbox element; onSelect(position, { focus }) is called when the reader picks a token.
  constructor(list, onSelect) {
    this.#list = list;
    this.#onSelect = onSelect;
    list.addEventListener('click', (event) => {
      const option = event.target.closest?.('[role="option"]');
      if (option) onSelect(Number(option.dataset.position), { focus: false });
    });
    list.addEventListener('keydown', (event) => this.#onKeydown(event));
  }

  // Shows texts[0..] (the tokens' texts by position), the tokens from generatedFrom on marked as generated; keeps
  // the options already shown whose text is unchanged.
  show(texts, generatedFrom) {
    if (texts.length === 0) return;
    // a shorter text is a new one (a new prompt): shown again from its start
    if (this.#options.length === 0 || this.#options.length > texts.length) {
      this.#list.replaceChildren();
      this.#options = [];
    }
    for (let position = 0; position < texts.length; position++) {
      const text = texts[position] ?? '';
      const shown = this.#options[position];
      if (shown && shown.dataset.text === text && shown.classList.contains('generated') === position >= generatedFrom) continue;
      const option = tokenOption(position, text, position >= generatedFrom);
      if (shown) shown.replaceWith(option);
      else this.#list.append(option);
      this.#options[position] = option;
    }
    if (!this.#options.some((option) => option.tabIndex === 0)) this.#options[0].tabIndex = 0;
  }

  clear(placeholder) {
    this.#options = [];
    this.#list.replaceChildren(element('p', 'placeholder', placeholder));
  }

  // Marks the selected token (and the token before it, whose pass produced it); focus: move the keyboard focus there.
  select(position, { focus = false, scroll = true } = {}) {
    for (const option of this.#list.querySelectorAll('.selected, .query')) {
      option.classList.remove('selected', 'query');
      option.setAttribute('aria-selected', 'false');
    }
    const option = this.#options[position];
    if (!option) return;
    for (const other of this.#options) other.tabIndex = other === option ? 0 : -1;
    option.classList.add('selected');
    option.setAttribute('aria-selected', 'true');
    this.#options[position - 1]?.classList.add('query');
    if (focus) option.focus();
    else if (scroll) followInBox(this.#list, option);
  }

  #onKeydown(event) {
    const option = event.target.closest?.('[role="option"]');
    if (!option) return;
    const position = Number(option.dataset.position);
    const last = this.#options.length - 1;
    const targets = { ArrowRight: position + 1, ArrowLeft: position - 1, Home: 0, End: last };
    const next = targets[event.key];
    if (next === undefined || next < 0 || next > last) return;
    event.preventDefault();
    this.#onSelect(next, { focus: true });
  }
}

function tokenOption(position, text, generated) {
  const option = element('span', generated ? 'inside-token generated' : 'inside-token', text.replaceAll('\n', '↵\n'));
  option.setAttribute('role', 'option');
  option.setAttribute('aria-selected', 'false');
  option.setAttribute('aria-label', `${tokenName(text)}, ${generated ? 'generated' : 'prompt'} token at position ${position}`);
  option.dataset.position = String(position);
  option.dataset.text = text;
  option.tabIndex = -1;
  return option;
}

// Scrolls the list's own box (not the page) so that option shows (the box is the options' offsetParent: style.css).
function followInBox(box, option) {
  const top = option.offsetTop;
  if (top < box.scrollTop || top + option.offsetHeight > box.scrollTop + box.clientHeight) {
    box.scrollTop = Math.max(0, top - box.clientHeight / 2);
  }
}
