// The page (public/index.html): its parts wired to its elements. Model choice and download progress
// (model_menu.js; the Weights and Device settings reload the model), the stored models (stored_models.js), the
// settings (settings.js), the Generate mode (generate_panel.js) with its Compare strategies and Inside the model
// views (compare_panel.js, inside_view.js) and the Analyze text mode (analyze_panel.js), the token tooltip of all
// three (tooltip.js).
import { analyze, stopAnalysis } from './analyze_panel.js';
import { wireComparePanel } from './compare_panel.js';
import { reloadAfterFailedRecovery } from './crash_recovery.js';
import { continueGeneration, generate, stopGeneration } from './generate_panel.js';
import { MODEL_CHOICES, choiceFromUrlParameter } from './model_choices.js';
import { fillModelSelect, onLocalFilesChosen, onLoadSettingChanged, onModelSelected, restoreModelSelection, switchModel } from './model_menu.js';
import { elements, showError, state } from './page_state.js';
import { PERSISTED_INPUTS, restoreSettings, saveSettings } from './settings.js';
import { refreshStoredModels } from './stored_models.js';
import { wireInsideView } from './inside_view.js';
import { followScroll, hideTooltip, wireTooltip } from './tooltip.js';

// Generate shows the prompt, the output, the speed and Compare strategies; Analyze text its text box and the analysis.
function showMode(mode) {
  const analyzing = mode === 'analyze';
  hideTooltip();
  elements.promptHeading.textContent = analyzing ? 'Text to analyze' : 'Prompt';
  for (const element of [elements.form, elements.output, elements.outputHint, elements.statsCard, elements.compareCard, elements.insideCard]) element.hidden = analyzing;
  for (const element of [elements.analyzeForm, elements.analysis]) element.hidden = !analyzing;
}

function start() {
  restoreSettings();
  let urlParameterError = null;
  try {
    state.urlChoice = choiceFromUrlParameter();
  } catch (error) {
    urlParameterError = error;
  }
  fillModelSelect(state.urlChoice);
  elements.model.addEventListener('change', onModelSelected);
  elements.localFiles.addEventListener('change', onLocalFilesChosen);
  elements.localFiles.addEventListener('cancel', restoreModelSelection);
  runOnSubmit(elements.form, elements.prompt, generate);
  elements.continue.addEventListener('click', continueGeneration);
  elements.stop.addEventListener('click', stopGeneration);
  runOnSubmit(elements.analyzeForm, elements.analyzeText, analyze);
  elements.analyzeStop.addEventListener('click', stopAnalysis);
  for (const radio of elements.modes) radio.addEventListener('change', () => showMode(radio.value));
  showMode(document.querySelector('input[name="mode"]:checked').value); // a reload may keep the last choice
  elements.reloadModel.addEventListener('click', reloadAfterFailedRecovery);
  for (const name of PERSISTED_INPUTS) elements[name].addEventListener('input', saveSettings);
  elements.weights.addEventListener('change', onLoadSettingChanged);
  elements.device.addEventListener('change', onLoadSettingChanged);
  wireTooltip(elements.output);
  wireTooltip(elements.analysisText);
  wireComparePanel();
  wireInsideView();
  document.addEventListener('keydown', (event) => event.key === 'Escape' && hideTooltip());
  // Scroll events do not bubble; capturing catches a token box scrolling as well as the page.
  document.addEventListener('scroll', followScroll, { capture: true, passive: true });
  refreshStoredModels();
  switchModel(state.urlChoice ?? MODEL_CHOICES[0]);
  if (urlParameterError) showError(urlParameterError.message); // after switchModel, which clears errors
}

// run() on the form's submit (its button, or Enter in a field) and on Ctrl/Cmd+Enter in its text area, which
// takes plain Enter as a new line.
function runOnSubmit(form, textArea, run) {
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run();
  });
  textArea.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
}

start();
