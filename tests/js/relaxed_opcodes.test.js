// The relaxed-SIMD build's opcode renumbering (tools/toolchain/relaxed_opcodes.mjs): the two relaxed instructions
// the engine uses change number between the standard and binaryen 108's numbering, nothing else in a module
// changes, and binaryen's own disassembler reads the renumbered module.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { renumberRelaxedOpcodes } from '../../tools/toolchain/relaxed_opcodes.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const section = (id, bytes) => [id, bytes.length, ...bytes];
const MADD = [0xfd, 0x85, 0x02];  // f32x4.relaxed_madd (standard 0x105)
const DOT = [0xfd, 0x93, 0x02];  // i32x4.relaxed_dot_i8x16_i7x16_add_s (standard 0x113)
// The bytes of both instructions, also inside immediates where a byte search would find them.
const LOOK_ALIKE = [0xfd, 0x85, 0x02, 0xfd, 0x93, 0x02, 0xfd, 0x85, 0x02, 0xfd, 0x93, 0x02, 0, 0, 0, 0];

// (module (memory 1) (func (param v128 v128 v128) (result v128) ...)) whose body holds `instructions` and, around
// them, a v128.const, an i32.const, a load offset and a shuffle mask that contain the same bytes.
function moduleWith(instructions) {
  const body = [
    0x00,
    0xfd, 0x0c, ...LOOK_ALIKE, 0x1a,  // v128.const ...; drop
    0x41, 0xfd, 0x85, 0x02, 0x1a,  // i32.const (LEB fd 85 02); drop
    0x41, 0x00, 0xfd, 0x00, 0x00, 0xfd, 0x93, 0x02, 0x1a,  // v128.load offset=(LEB fd 93 02); drop
    0x20, 0x00, 0x20, 0x01, 0xfd, 0x0d, ...LOOK_ALIKE.map((b) => b & 31), 0x1a,  // i8x16.shuffle; drop
    0x20, 0x00, 0x20, 0x01, 0x20, 0x02, ...instructions,
    0x0b,
  ];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b]),
    ...section(3, [0x01, 0x00]),
    ...section(5, [0x01, 0x00, 0x01]),
    ...section(10, [0x01, body.length, ...body]),
  ]);
}

function binaryenText(bytes) {
  const dir = mkdtempSync(`${tmpdir()}/gpt2-relaxed-`);
  try {
    writeFileSync(`${dir}/m.wasm`, bytes);
    return execFileSync('wasm-dis', ['--enable-simd', '--enable-relaxed-simd', `${dir}/m.wasm`], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true });
  }
}

test('the two instructions are renumbered for binaryen and back, and no byte of the immediates changes', () => {
  const standard = moduleWith([...MADD, 0x20, 0x01, 0x20, 0x02, ...DOT]);  // dot(madd(a, b, c), b, c)
  const { module: forBinaryen, count } = renumberRelaxedOpcodes(standard, 'binaryen');
  expect(count).toBe(2);
  expect(forBinaryen).toHaveLength(standard.length);
  const changed = Array.from(standard.keys()).filter((i) => standard[i] !== forBinaryen[i]);
  const end = standard.length - 1;  // the body's final `end`
  // madd's and dot's opcode bytes only: [fd 85 02] -> [fd af 01] and [fd 93 02] -> [fd 94 02]
  expect(changed.map((i) => [end - i, standard[i], forBinaryen[i]])).toEqual([
    [9, 0x85, 0xaf], [8, 0x02, 0x01], [2, 0x93, 0x94],
  ]);
  const text = binaryenText(forBinaryen);
  expect(text).toContain('f32x4.relaxed_fma');
  expect(text).toContain('i32x4.dot_i8x16_i7x16_add_s');
  const back = renumberRelaxedOpcodes(forBinaryen, 'standard');
  expect(back.count).toBe(2);
  expect(Buffer.from(back.module).equals(Buffer.from(standard))).toBe(true);
});

test('a relaxed opcode without a translation stops the renumbering with its number and offset', () => {
  const swizzle = moduleWith([0x1a, 0xfd, 0x80, 0x02]);  // drop; i8x16.relaxed_swizzle (standard 0x100)
  expect(() => renumberRelaxedOpcodes(swizzle, 'binaryen'))
    .toThrow(`relaxed_opcodes: relaxed SIMD opcode 0x100 (standard numbering) at byte ${swizzle.length - 4} has no translation`);
  const laneselect = moduleWith([0xfd, 0xb2, 0x01]);  // binaryen 108's i8x16.laneselect
  expect(() => renumberRelaxedOpcodes(laneselect, 'standard'))
    .toThrow(`relaxed_opcodes: relaxed SIMD opcode 0xb2 (binaryen numbering) at byte ${laneselect.length - 4} has no translation`);
  expect(() => renumberRelaxedOpcodes(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), 'binaryen'))
    .toThrow('relaxed_opcodes: not a WebAssembly module (no \\0asm header)');
  expect(() => renumberRelaxedOpcodes(moduleWith([]).subarray(0, 40), 'binaryen')).toThrow('relaxed_opcodes: section 10 runs past the module\'s end');
});

test.each(['gpt2', 'gpt2-mt'])('the shipped %s-relaxed.wasm holds the two relaxed instructions in the standard numbering, its SIMD128 twin none', (name) => {
  const relaxed = renumberRelaxedOpcodes(readFileSync(`${ROOT}public/wasm/${name}-relaxed.wasm`), 'binaryen');
  console.log(`${name}-relaxed.wasm: ${relaxed.count} relaxed instructions`);
  expect(relaxed.count).toBeGreaterThan(0);
  expect(renumberRelaxedOpcodes(readFileSync(`${ROOT}public/wasm/${name}.wasm`), 'binaryen').count).toBe(0);
});
