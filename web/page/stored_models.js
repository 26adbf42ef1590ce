// The Stored models list of the Settings panel.
import { resolveAgainstPage } from '../lib/environment.js';
import { deleteCachedModel, listCachedModels } from '../lib/gpt2.js';
import { GGUF_CHOICES, MODEL_CHOICES } from './model_choices.js';
import { elements, showError, state } from './page_state.js';
import { formatMegabytes } from '../lib/progress_text.js';

// The models the Cache API keeps (listCachedModels), each with its size and a Delete button; listed again after
// each load and delete. Deleting the model in use is allowed: it stays loaded, and loading it again downloads it.
let storedModelsRefreshes = 0;  // a refresh that ends after a later one has started shows nothing

export async function refreshStoredModels() {
  const refresh = ++storedModelsRefreshes;
  let models;
  let failure = null;
  try {
    models = await listCachedModels();
  } catch (error) {
    [models, failure] = [[], error];
  }
  if (refresh !== storedModelsRefreshes) return;
  elements.storedModels.replaceChildren(...models.map(storedModelItem));
  elements.storedModels.hidden = models.length === 0;
  elements.storedModelsEmpty.hidden = models.length > 0;
  elements.storedModelsEmpty.textContent = failure ? `Could not read the stored models: ${failure.message}` : 'No models stored';
}

function storedModelItem({ source, bytes, complete }) {
  const name = storedModelName(source);
  const label = document.createElement('span');
  label.className = 'stored-model-name';
  label.textContent = name;
  const size = document.createElement('data');  // its value: the exact bytes
  size.className = 'stored-model-size';
  size.value = String(bytes);
  size.textContent = `${formatMegabytes(bytes)}${complete ? '' : ', incomplete'}`;
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Delete';
  button.setAttribute('aria-label', `Delete ${name}`);
  button.addEventListener('click', () => deleteStoredModel(source, button));
  const item = document.createElement('li');
  item.append(label, ' ', size, ' ', button);  // the spaces separate the parts in what screen readers get
  return item;
}

// A stored model's name: the menu's label when its source is a menu entry's, else its URL.
function storedModelName(source) {
  const choices = [...MODEL_CHOICES, ...GGUF_CHOICES, state.urlChoice];
  const choice = choices.find((entry) => entry && resolveAgainstPage(entry.source).href === source);
  return choice?.label ?? source;
}

// Keyboard users keep their place: focus moves to the Delete button that takes the deleted one's place, or to
// the list's empty state.
async function deleteStoredModel(source, button) {
  const position = [...elements.storedModels.children].indexOf(button.closest('li'));
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  try {
    await deleteCachedModel(source);
  } catch (error) {
    showError(`Could not delete ${storedModelName(source)}: ${error.message}`);
  }
  await refreshStoredModels();
  if (!hadFocus) return;
  const buttons = elements.storedModels.querySelectorAll('button');
  (buttons[Math.min(position, buttons.length - 1)] ?? elements.storedModelsEmpty).focus();
}
