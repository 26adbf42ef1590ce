// The two relaxed-SIMD instructions the engine uses, renumbered between the standard opcodes (what clang 16 emits
// and engines run) and binaryen 108's pre-standard ones (what emscripten 3.1.6's wasm-opt and
// wasm-emscripten-finalize parse). Both numberings take two bytes after the 0xfd prefix, so a module keeps its
// length and every offset in it. The code section is decoded instruction by instruction: a byte pattern search
// would also hit constants, memory offsets and shuffle masks.
//
//   instruction                            standard   binaryen 108 name and number
//   f32x4.relaxed_madd                     0x105      f32x4.relaxed_fma                0xaf
//   i32x4.relaxed_dot_i8x16_i7x16_add_s    0x113      i32x4.dot_i8x16_i7x16_add_s      0x114
//

const RELAXED = [
  { name: 'f32x4.relaxed_madd', standard: 0x105, binaryen: 0xaf },
  { name: 'i32x4.relaxed_dot_i8x16_i7x16_add_s', standard: 0x113, binaryen: 0x114 },
];
// Every relaxed opcode of each numbering (binaryen 108's measured with its wasm-as): one outside the table above
// may not pass through, since its meaning differs between the two.
const RELAXED_OPCODES = {
  standard: Array.from({ length: 0x14 }, (_, i) => 0x100 + i),
  binaryen: [0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee]
    .concat([0x111, 0x112, 0x113, 0x114, 0x115]),
};
// The SIMD opcodes with immediates (every other 0xfd opcode has none).
const SIMD_MEMARG = (op) => op <= 0x0b || op === 0x5c || op === 0x5d;
const SIMD_LANE = (op) => op >= 0x15 && op <= 0x22;
const SIMD_MEMARG_LANE = (op) => op >= 0x54 && op <= 0x5b;

class Reader {
  constructor(bytes, at, end) {
    this.bytes = bytes;
    this.at = at;
    this.end = end;
  }
  byte() {
    if (this.at >= this.end) throw new Error(`relaxed_opcodes: truncated module at byte ${this.at}`);
    return this.bytes[this.at++];
  }
  leb() {
    let value = 0,
      shift = 0,
      b;
    do {
      b = this.byte();
      if (shift < 35) value += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    return value;
  }
  skip(n) {
    this.at += n;
    if (this.at > this.end) throw new Error(`relaxed_opcodes: truncated module at byte ${this.end}`);
  }
  memarg() {
    this.leb();
    this.leb();
  }
}

// Skips one instruction's immediates after its opcode byte; for the 0xfd prefix calls onSimd(opcode, at, length).
function skipImmediates(r, op, onSimd) {
  if (op === 0x02 || op === 0x03 || op === 0x04 || op === 0x06) {
    // block type: 0x40 (none), a value type (one byte, 0x6f-0x7f) or a type index (s33 LEB)
    const b = r.bytes[r.at];
    if (b === 0x40 || (b >= 0x6f && b <= 0x7f)) r.skip(1);
    else r.leb();
  } else if ((op >= 0x07 && op <= 0x09) || op === 0x0c || op === 0x0d || op === 0x10 || op === 0x12 || op === 0x18) r.leb();
  else if (op === 0x0e) {
    const n = r.leb();
    for (let i = 0; i <= n; i++) r.leb();
  } else if (op === 0x11 || op === 0x13) {
    r.leb();
    r.leb();
  } else if (op === 0x1c) r.skip(r.leb());
  else if (op >= 0x20 && op <= 0x26) r.leb();
  else if (op >= 0x28 && op <= 0x3e) r.memarg();
  else if (op === 0x3f || op === 0x40 || op === 0x41 || op === 0x42 || op === 0xd2) r.leb();
  else if (op === 0x43) r.skip(4);
  else if (op === 0x44) r.skip(8);
  else if (op === 0xd0) r.skip(1);
  else if (op === 0xfc) {
    const sub = r.leb();
    if (sub === 8) {
      r.leb();
      r.skip(1);
    } else if (sub === 9 || sub === 11 || sub === 13 || sub === 15 || sub === 16 || sub === 17) r.leb();
    else if (sub === 10 || sub === 12 || sub === 14) {
      r.leb();
      r.leb();
    }
  } else if (op === 0xfd) {
    const at = r.at;
    const sub = r.leb();
    onSimd(sub, at, r.at - at);  // the opcode's LEB bytes follow the prefix byte at at - 1
    if (SIMD_MEMARG(sub)) r.memarg();
    else if (sub === 0x0c || sub === 0x0d) r.skip(16);
    else if (SIMD_LANE(sub)) r.skip(1);
    else if (SIMD_MEMARG_LANE(sub)) {
      r.memarg();
      r.skip(1);
    }
  } else if (op === 0xfe) {
    const sub = r.leb();
    if (sub === 0x03) r.skip(1);
    else r.memarg();
  }
}

function encodeLeb2(value) {
  return [(value & 0x7f) | 0x80, value >> 7];
}

// A copy of the module `wasm` (bytes) with the relaxed opcodes renumbered to `to` ('standard' or 'binaryen');
// { module, count } where count is the number of instructions renumbered. Throws on a malformed module or a relaxed
// opcode this table does not carry.
export function renumberRelaxedOpcodes(wasm, to) {
  if (to !== 'standard' && to !== 'binaryen') throw new Error(`relaxed_opcodes: unknown numbering "${to}"`);
  const from = to === 'standard' ? 'binaryen' : 'standard';
  const bytes = Uint8Array.from(wasm);
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d)
    throw new Error('relaxed_opcodes: not a WebAssembly module (no \\0asm header)');
  let count = 0;
  const onSimd = (sub, at, length) => {
    const entry = RELAXED.find((e) => e[from] === sub);
    if (entry) {
      if (length !== 2) throw new Error(`relaxed_opcodes: ${entry.name} at byte ${at - 1} is not encoded in two bytes`);
      bytes.set(encodeLeb2(entry[to]), at);
      count++;
    } else if (RELAXED_OPCODES[from].includes(sub)) {
      throw new Error(
        `relaxed_opcodes: relaxed SIMD opcode 0x${sub.toString(16)} (${from} numbering) at byte ${at - 1} has no translation`,
      );
    }
  };
  const top = new Reader(bytes, 8, bytes.length);
  while (top.at < bytes.length) {
    const id = top.byte();
    const size = top.leb();
    const end = top.at + size;
    if (end > bytes.length) throw new Error(`relaxed_opcodes: section ${id} runs past the module's end`);
    if (id === 10) {
      const r = new Reader(bytes, top.at, end);
      const n = r.leb();
      for (let f = 0; f < n; f++) {
        const bodySize = r.leb();
        const body = new Reader(bytes, r.at, r.at + bodySize);
        const groups = body.leb();
        for (let g = 0; g < groups; g++) {
          body.leb();
          body.skip(1);
        }
        while (body.at < body.end) skipImmediates(body, body.byte(), onSimd);
        r.at = body.end;
      }
    }
    top.at = end;
  }
  return { module: bytes, count };
}
