// Streaming reader for GGUF v3 files (ggml's docs/gguf.md): the header, the metadata key/value pairs, the tensor
// infos, then the data section, fed in file order in chunks of any size (1 byte works) and never held whole. Of
// the metadata only what a GPT-2 model needs is kept (GgufModelInfo); every other value is skipped as it passes.
// Each tensor's bytes go to a GgufSink as they arrive. Every count, size, dimension and offset is checked with
// overflow-safe arithmetic; what a file can make the reader hold is capped (the kGguf* constants below); all
// allocations are non-throwing. Errors are one line starting with "model.gguf: " ("out of memory: ..." when an
// allocation fails).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpt2.h"
#include "model/vocabulary.h"

namespace gpt2 {

// Caps on what a file can make the reader hold (a GPT-2 file needs far less: 148 tensors, about 25 keys, 50257
// tokens in 0.4 MB, 50000 merges in 0.5 MB).
constexpr uint64_t kGgufMaxTensors = 65536;             // tensor count in the header
constexpr uint64_t kGgufMaxMetadata = 65536;            // metadata key/value count in the header
constexpr uint64_t kGgufMaxKeyBytes = 65535;            // one key (the GGUF spec's own limit)
constexpr uint64_t kGgufMaxAllKeyBytes = 1u << 20;      // all keys together (kept to reject duplicates)
constexpr uint64_t kGgufMaxTensorNameBytes = 255;       // one tensor name (ggml itself allows 63)
constexpr uint64_t kGgufMaxStringValueBytes = 256;      // general.architecture, tokenizer.ggml.model
constexpr uint64_t kGgufMaxTokens = 1u << 20;           // entries of tokenizer.ggml.tokens / .merges each
constexpr uint64_t kGgufMaxTokenListBytes = 16u << 20;  // bytes of all tokens (or all merges) together
constexpr uint64_t kGgufMaxAlignment = 1u << 20;        // general.alignment (a power of two)
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;
// The size of a file that is streamed without a known length.
constexpr uint64_t kGgufUnknownFileSize = UINT64_MAX;

// ggml tensor types the engine knows (the numbers are ggml's enum ggml_type).
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
};

// ggml's name of a type number ("Q2_K", "BF16", ...), or nullptr for a number ggml does not use.
const char* ggml_type_name(uint32_t type);
// Whether the engine knows the type (one of GgmlType).
bool ggml_type_known(uint32_t type);
// Values per block and bytes per block of a known type (ggml-common.h's block_* structs; F32/F16: 1 value).
uint32_t ggml_block_values(GgmlType type);
uint32_t ggml_block_bytes(GgmlType type);

struct GgufTensor {
    uint32_t name = 0;  // index into GgufModelInfo::tensor_names
    uint32_t n_dims = 0;
    uint64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ggml order: ne[0] is the innermost (contiguous) dimension
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;      // first byte in the data section (a multiple of the alignment)
    uint64_t n_elements = 0;  // product of ne (at most 2^48)
    uint64_t bytes = 0;       // n_elements / block values * block bytes
};

// What the engine keeps of a GGUF file's front: the hyper-parameters, the tokenizer and the tensor infos.
struct GgufModelInfo {
    uint32_t context_length = 0;       // gpt2.context_length
    uint32_t embedding_length = 0;     // gpt2.embedding_length
    uint32_t block_count = 0;          // gpt2.block_count
    uint32_t head_count = 0;           // gpt2.attention.head_count
    uint32_t feed_forward_length = 0;  // gpt2.feed_forward_length
    float layer_norm_epsilon = 0.0f;   // gpt2.attention.layer_norm_epsilon
    uint32_t eos_token_id = 0;         // tokenizer.ggml.eos_token_id
    bool has_bos_token_id = false;
    uint32_t bos_token_id = 0;  // tokenizer.ggml.bos_token_id, when has_bos_token_id
    GgufStringList tokens;      // tokenizer.ggml.tokens
    GgufStringList merges;      // tokenizer.ggml.merges ("a b" pairs)

    uint32_t alignment = kGgufDefaultAlignment;  // general.alignment
    GgufStringList tensor_names;                 // (tensors) in file order
    GgufArray<GgufTensor> tensors;               // in file order
    uint64_t data_offset = 0;                    // file offset of the data section (a multiple of alignment)
    uint64_t data_bytes = 0;                     // end of the last tensor's bytes in the data section

    std::string_view tensor_name(size_t i) const { return tensor_names[tensors[i].name]; }
};

// Receives the file's contents once its front is parsed. A false return stops the reader with *error, which
// the sink writes in full (one line naming the file, or "out of memory: ..."), and error_kind().
class GgufSink {
   public:
    virtual ~GgufSink() = default;
    // What the last refusal was about: the file, unless a sink says otherwise (ErrorKind::memory).
    virtual ErrorKind error_kind() const { return ErrorKind::file; }
    // The metadata and tensor infos are complete and checked; no tensor byte has arrived yet.
    virtual bool on_header(const GgufModelInfo& info, std::string* error) = 0;
    // The next n bytes of tensor `tensor` (index into info.tensors), starting at byte_offset within it. Tensors
    // arrive in data-offset order, each one's bytes in order, a call never spanning two tensors.
    virtual bool on_tensor_bytes(size_t tensor, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                                 std::string* error) = 0;
};

class GgufReader {
   public:
    // file_size may be kGgufUnknownFileSize: then tensors past the end are found when the file ends (finish).
    explicit GgufReader(GgufSink* sink, uint64_t file_size = kGgufUnknownFileSize);

    // The next n bytes of the file. false (and error()) once the file is found invalid or the sink stops.
    bool feed(const uint8_t* bytes, size_t n);
    // The file has ended: false if it ended early (naming where) or with bytes after the data.
    bool finish();

    bool failed() const { return !error_.empty(); }
    const std::string& error() const { return error_; }
    // file, or memory when an allocation failed (the reader's, or its sink's as GgufSink::error_kind() says)
    ErrorKind error_kind() const { return error_kind_; }
    // The kept metadata and tensor infos (complete once the sink's on_header has been called). The mutable one
    // lets the reader's owner take the tokenizer lists (swap) once the file is read.
    const GgufModelInfo& info() const { return info_; }
    GgufModelInfo& info() { return info_; }

   private:
    // What the next bytes of the file are.
    enum class Step {
        // the header
        magic,
        version,
        tensor_count,
        metadata_count,
        // a metadata entry: its key, its value (a scalar, a string or an array of either)
        key_length,
        key,
        value_type,
        scalar,
        string_length,
        string,
        array_type,
        array_count,
        array_skip,
        element_length,
        element,
        // a tensor info
        name_length,
        name,
        n_dims,
        dim,
        tensor_type,
        tensor_offset,
        // the data section: padding and tensor bytes
        data
    };
    // How the bytes of the current step are taken: a little-endian field of up to 8 bytes, bytes kept into a
    // string list, or bytes skipped.
    enum class Mode { field, keep, skip, data };

    // The next step reads a field of `bytes` bytes / `bytes` bytes kept into keep_into (nullptr: skipped).
    void expect_field(Step step, size_t bytes);
    void expect_bytes(Step step, uint64_t bytes, GgufStringList* keep_into);
    bool fail(const std::string& message);
    bool no_memory(uint64_t bytes, const std::string& what);  // out_of_memory into error(), kind memory; false
    // The current step's field (its value) or bytes are complete: check them and choose the next step.
    bool on_field(uint64_t value);
    bool on_bytes_done();
    bool next_entry();
    bool start_value(uint32_t type);
    bool next_element();
    bool end_value();
    bool end_metadata();
    bool check_kept_scalar(uint64_t value);
    bool check_kept_string();
    bool next_tensor_info();
    bool end_tensor_infos();
    bool start_data();
    bool trailing_bytes();
    bool sink_failed();
    // The data section: delivers what belongs to the current tensor. Returns the bytes used.
    size_t feed_data(const uint8_t* bytes, size_t n);
    // The part of the file being read, for the error of a file that ends there.
    std::string where() const;
    std::string current_key() const;

    GgufSink* sink_;
    uint64_t file_size_;
    uint64_t fed_ = 0;  // bytes of the file consumed
    std::string error_;
    ErrorKind error_kind_ = ErrorKind::file;
    GgufModelInfo info_;

    Step step_ = Step::magic;
    Mode mode_ = Mode::field;
    size_t field_size_ = 4;  // bytes of the field being read
    size_t field_fill_ = 0;
    uint8_t field_[8] = {};           // (field_size_) the field's bytes so far
    uint64_t remaining_ = 0;          // keep/skip/data: bytes of the step still to come
    GgufStringList* keep_ = nullptr;  // keep: where the bytes go
    GgufStringList string_value_;     // a kept key's string value (at most kGgufMaxStringValueBytes)

    uint64_t tensor_count_ = 0;
    uint64_t metadata_count_ = 0;
    uint64_t entry_ = 0;  // metadata entry being read
    GgufStringList keys_;
    int kept_key_ = -1;           // which kept key the current value is for (index into the table in gguf.cpp)
    uint32_t element_type_ = 0;   // of the current array
    uint64_t elements_left_ = 0;  // of the current array (string arrays)
    uint32_t seen_ = 0;           // bit i: kept key i has been read

    GgufTensor tensor_;          // the tensor info being read
    uint32_t dims_read_ = 0;     // of tensor_
    GgufArray<uint32_t> order_;  // (tensors) indices by data offset
    size_t next_ = 0;            // position in order_ of the tensor being received
    uint64_t tensor_pos_ = 0;    // bytes of the current tensor delivered
    uint64_t data_end_ = 0;      // the file ends by here: the last tensor's end, padded to the alignment
};

}  // namespace gpt2
