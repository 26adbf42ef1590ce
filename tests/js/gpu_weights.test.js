// Which models the GPU kernels take (web/lib/gpu/gpu_weights.js unsupportedWeights): every weight type the engine
// runs, so that a type added to the engine without a GPU kernel is refused by name instead of run by another
// type's kernel.
import { GPU_WEIGHT_FORMATS, unsupportedWeights } from '../../web/lib/gpu/gpu_weights.js';

const model = (weightTypes, n_embd = 64) => ({ weightTypes, config: { n_embd } });

test('every weight type the engine runs is one the GPU kernels take', () => {
  // engine/model/model.cpp weight_format_name, in WeightFormat's order
  const engineFormats = ['fp32', 'int8', 'f16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];
  expect([...GPU_WEIGHT_FORMATS].sort()).toEqual([...engineFormats].sort());
  expect(unsupportedWeights(model(engineFormats.join(', ')))).toBeNull();
});

test('a type without a GPU kernel is named, and so is an n_embd the kernels cannot take', () => {
  expect(unsupportedWeights(model('q4_k, q9_9'))).toBe(
    'the GPU kernels run fp32, int8, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k and q6_k weights; this model has q9_9');
  expect(unsupportedWeights(model('fp32', 6))).toBe('the GPU kernels need n_embd to be a multiple of 4, got 6');
});
