// What every kind of Model tells of the weights it runs (gpt2.js's Model: config, weightBytes, weightTypes,
// threads), taken from the model it stands for: the engine's (LocalModel), the worker's answer to a load
// (WorkerModel) or a shared model (LeasedModel).

// -> { config, weightBytes, weightTypes, threads } of model: what the engine worker sends of a model it loaded.
export function describeModel({ config, weightBytes, weightTypes, threads }) {
  return { config, weightBytes, weightTypes, threads };
}

// The base of the Model classes: those fields, set once from the model described.
export class DescribedModel {
  config;
  weightBytes;
  weightTypes;
  threads;

  constructor(model) {
    Object.assign(this, describeModel(model));
  }
}
