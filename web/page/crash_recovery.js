// What the page says and allows while a model loads itself again after the engine crashed.
import { elements, showError, state, updateControls } from './page_state.js';

// The engine aborted (a genuine out-of-memory, say): the model loads itself again (gpt2.js) while the page says
// so; if that fails, one button tries again.
export function recoverFromCrash(crash) {
  const { label } = state.modelChoice;
  const crashed = `The engine crashed (${crash.reason}) and was restarted`;
  awaitRecovery(`${crashed}; loading ${label} again…`, `${crashed}; ${label} was loaded again: Generate to continue.`,
    `${crashed}, and ${label} could not be loaded again`);
}

export function reloadAfterFailedRecovery() {
  const { label } = state.modelChoice;
  awaitRecovery(`Loading ${label} again…`, `${label} was loaded again: Generate to continue.`, `${label} could not be loaded again`);
}

// Says `during` while the model is not usable, then `loaded`, or `failed` with the reason and the reload button.
async function awaitRecovery(during, loaded, failed) {
  const { model } = state;
  state.recovery = 'reloading';
  elements.reloadModel.hidden = true;
  updateControls();
  showError(during);
  try {
    await model.whenUsable();
    if (state.model !== model) return;
    state.recovery = null;
    showError(loaded);
  } catch (error) {
    if (state.model !== model) return;
    state.recovery = 'failed';
    showError(`${failed}: ${error.message}`);
    elements.reloadModel.textContent = `Load ${state.modelChoice.label} again`;
    elements.reloadModel.hidden = false;
  } finally {
    updateControls();
  }
}
