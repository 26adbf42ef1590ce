// The page's controls, found by the accessible names that screen readers use too (shared by the page specs).
export function controls(page) {
  return {
    prompt: page.getByRole('textbox', { name: 'Prompt' }),
    generate: page.getByRole('button', { name: 'Generate' }),
    stop: page.getByRole('button', { name: 'Stop' }),
    output: page.getByRole('region', { name: 'Output' }),
    alert: page.getByRole('alert'),
    model: page.getByRole('combobox', { name: 'Model' }),
    kvCache: page.getByRole('checkbox', { name: 'KV cache' }),
    progress: page.getByRole('progressbar', { name: 'Model download' }),
  };
}
