#!/bin/sh
# One of binaryen's tools, named by this link's name, through the relaxed-SIMD opcode renumbering.
exec node "$(dirname "$(readlink -f "$0")")/../../binaryen_relaxed.mjs" "$(basename "$0")" "$@"
