// libFuzzer target: the input is model.gguf, read by gpt2::GgufReader. Beyond "no crash, no sanitizer report,
// no leak", the input is read whole and in pieces of 1 to 64 bytes (sizes drawn from the input itself):
//  - file size announced: the pieces give the same outcome, the same error message and the same tensor bytes as
//    the whole input;
//  - size not announced: the file is read exactly when the whole input is (the error may differ: a tensor past
//    the end is then found when the file ends), with the same tensor bytes;
//  - a failure is one line starting with "model.gguf: " (or "out of memory: ");
//  - a success delivered every tensor's bytes, in order, each tensor whole and inside the data section.
// fuzz_gguf_model.cpp takes the same inputs through the model loader.
// Seeds: tests/fuzz/corpus/gguf (tests/fuzz/make_gguf_corpus.py), run by tools/dev/fuzz.sh 60 fuzz_gguf.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "fuzz_common.h"

namespace {

// Checks the order of the bytes it receives and keeps a hash of them per tensor.
class HashingSink : public gpt2::GgufSink {
   public:
    bool on_header(const gpt2::GgufModelInfo& info, std::string*) override {
        if (received_.size()) gpt2_fuzz::fail("on_header called twice", "");
        received_.assign(info.tensors.size(), 0);
        hashes_.assign(info.tensors.size(), 1469598103934665603ull);
        return true;
    }
    bool on_tensor_bytes(size_t tensor, uint64_t byte_offset, const uint8_t* bytes, size_t n, std::string*) override {
        if (tensor >= received_.size() || byte_offset != received_[tensor] || n == 0)
            gpt2_fuzz::fail("tensor bytes out of order", std::to_string(tensor));
        for (size_t i = 0; i < n; i++) hashes_[tensor] = (hashes_[tensor] ^ bytes[i]) * 1099511628211ull;
        received_[tensor] += n;
        return true;
    }
    std::vector<uint64_t> received_;  // (tensors) bytes received
    std::vector<uint64_t> hashes_;    // (tensors) FNV-1a of the bytes received
};

struct Outcome {
    bool ok = false;
    std::string error;
    std::vector<uint64_t> hashes;
};

void check_complete(const gpt2::GgufModelInfo& info, const HashingSink& sink) {
    uint64_t end = 0;
    for (size_t i = 0; i < info.tensors.size(); i++) {
        const gpt2::GgufTensor& t = info.tensors[i];
        if (sink.received_[i] != t.bytes) gpt2_fuzz::fail("a tensor was not delivered whole", std::to_string(i));
        if (t.offset % info.alignment != 0) gpt2_fuzz::fail("a misaligned tensor was accepted", std::to_string(i));
        end = std::max(end, t.offset + t.bytes);
    }
    if (end != info.data_bytes) gpt2_fuzz::fail("data_bytes is not the end of the last tensor", "");
    if (info.eos_token_id >= info.tokens.size()) gpt2_fuzz::fail("eos_token_id outside the vocabulary", "");
}

// Reads data whole (max_piece 0) or in pieces of 1..max_piece bytes.
Outcome read(const uint8_t* data, size_t size, bool size_known, size_t max_piece) {
    HashingSink sink;
    gpt2::GgufReader reader(&sink, size_known ? size : gpt2::kGgufUnknownFileSize);
    uint64_t state = size * 0x9E3779B97F4A7C15ull + (size ? data[size / 2] : 0);
    bool ok = true;
    for (size_t offset = 0; ok && offset < size;) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const size_t n = max_piece ? std::min<size_t>(size - offset, 1 + (state >> 33) % max_piece) : size;
        ok = reader.feed(data + offset, n);
        offset += n;
    }
    Outcome outcome;
    outcome.ok = ok && reader.finish();
    outcome.error = reader.error();
    if (outcome.ok) {
        check_complete(reader.info(), sink);
        outcome.hashes = sink.hashes_;
    } else {
        gpt2_fuzz::check_load_error(outcome.error);
    }
    return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Outcome whole = read(data, size, true, 0);
    const Outcome pieces = read(data, size, true, 64);
    const Outcome unannounced = read(data, size, false, 64);
    if (pieces.ok != whole.ok || pieces.error != whole.error || pieces.hashes != whole.hashes)
        gpt2_fuzz::fail("a read in pieces (size announced) differs from the whole read",
                        pieces.error + " / " + whole.error);
    if (unannounced.ok != whole.ok || unannounced.hashes != whole.hashes)
        gpt2_fuzz::fail("a read in pieces (size not announced) differs from the whole read",
                        unannounced.error + " / " + whole.error);
    return 0;
}
