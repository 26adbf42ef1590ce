# Copies the Emscripten output NAME.{js,wasm[,worker.js]} in BUILD_DIR to OUTPUT_DIR as NAME.wasm + NAME.cjs
# (Node) + NAME.mjs (browsers, workers) [+ NAME.worker.cjs, the pthread worker of a -pthread build].
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
file(COPY_FILE "${BUILD_DIR}/${NAME}.wasm" "${OUTPUT_DIR}/${NAME}.wasm")
file(READ "${BUILD_DIR}/${NAME}.js" glue)
file(WRITE "${OUTPUT_DIR}/${NAME}.cjs" "${glue}")
file(WRITE "${OUTPUT_DIR}/${NAME}.mjs" "${glue}\nexport default GPT2Module;\n")
if(EXISTS "${BUILD_DIR}/${NAME}.worker.js")
  file(COPY_FILE "${BUILD_DIR}/${NAME}.worker.js" "${OUTPUT_DIR}/${NAME}.worker.cjs")
endif()
