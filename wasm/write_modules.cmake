# Copies the Emscripten output to public/wasm/ as gpt2.wasm + gpt2.cjs (Node) + gpt2.mjs (browsers, workers).
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
file(COPY_FILE "${WASM}" "${OUTPUT_DIR}/gpt2.wasm")
file(READ "${GLUE}" glue)
file(WRITE "${OUTPUT_DIR}/gpt2.cjs" "${glue}")
file(WRITE "${OUTPUT_DIR}/gpt2.mjs" "${glue}\nexport default GPT2Module;\n")
