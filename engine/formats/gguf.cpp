#include "formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "formats/json.h"      // printable
#include "model/allocation.h"  // out_of_memory

// Fields are assembled little-endian by hand, but tensor bytes are handed on as they are: GGUF v3 files are
// little-endian, as are the hosts (x86, ARM, wasm).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the GGUF reader assumes a little-endian host");

namespace gpt2 {

namespace {

// GGUF metadata value types (gguf.md: enum gguf_metadata_value_type).
enum ValueType : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};
constexpr uint32_t kValueTypeCount = 13;

const char* value_type_name(uint32_t type) {
    static const char* const names[kValueTypeCount] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                       "bool", "string", "array", "u64", "i64", "f64"};
    return type < kValueTypeCount ? names[type] : "?";
}

// Bytes of a scalar value type; 0 for string and array.
uint64_t value_size(uint32_t type) {
    static const uint8_t sizes[kValueTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sizes[type];
}

// The metadata the engine keeps, with the value type each must have.
enum KeptKey {
    kArchitecture,
    kContextLength,
    kEmbeddingLength,
    kBlockCount,
    kHeadCount,
    kLayerNormEpsilon,
    kFeedForwardLength,
    kTokenizerModel,
    kTokens,
    kMerges,
    kEosTokenId,
    kBosTokenId,
    kAlignment,
    kKeptKeyCount,
};
struct KeptKeySpec {
    const char* name;
    uint32_t type;
    uint32_t element_type;  // arrays only
    bool required;
};
const KeptKeySpec kKeptKeys[kKeptKeyCount] = {
    {"general.architecture", kString, 0, true},
    {"gpt2.context_length", kU32, 0, true},
    {"gpt2.embedding_length", kU32, 0, true},
    {"gpt2.block_count", kU32, 0, true},
    {"gpt2.attention.head_count", kU32, 0, true},
    {"gpt2.attention.layer_norm_epsilon", kF32, 0, true},
    {"gpt2.feed_forward_length", kU32, 0, true},
    {"tokenizer.ggml.model", kString, 0, true},
    {"tokenizer.ggml.tokens", kArray, kString, true},
    {"tokenizer.ggml.merges", kArray, kString, true},
    {"tokenizer.ggml.eos_token_id", kU32, 0, true},
    {"tokenizer.ggml.bos_token_id", kU32, 0, false},
    {"general.alignment", kU32, 0, false},
};

int find_kept_key(std::string_view key) {
    for (int i = 0; i < kKeptKeyCount; i++)
        if (key == kKeptKeys[i].name) return i;
    return -1;
}

// ggml's enum ggml_type names, by number (nullptr: a number ggml retired or never used).
const char* const kGgmlTypeNames[] = {
    "F32",    "F16",      "Q4_0",     "Q4_1",     "Q4_2",  "Q4_3",  "Q5_0",       "Q5_1",       "Q8_0",       "Q8_1",
    "Q2_K",   "Q3_K",     "Q4_K",     "Q5_K",     "Q6_K",  "Q8_K",  "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",    "IQ1_S",
    "IQ4_NL", "IQ3_S",    "IQ2_S",    "IQ4_XS",   "I8",    "I16",   "I32",        "I64",        "F64",        "IQ1_M",
    "BF16",   "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
};

// Element counts are bounded far below 2^64 (no real tensor comes near), so byte sizes cannot overflow.
constexpr uint64_t kMaxElements = uint64_t(1) << 48;

std::string quoted(std::string_view s) { return "'" + printable(std::string(s)) + "'"; }

std::string u64(uint64_t v) { return std::to_string(v); }

// The first multiple of alignment (a power of two) at or after v; false on overflow.
bool align_up(uint64_t v, uint64_t alignment, uint64_t* out) {
    if (v > UINT64_MAX - (alignment - 1)) return false;
    *out = (v + alignment - 1) & ~(alignment - 1);
    return true;
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
    return type < sizeof kGgmlTypeNames / sizeof kGgmlTypeNames[0] ? kGgmlTypeNames[type] : nullptr;
}

bool ggml_type_known(uint32_t type) {
    switch (GgmlType(type)) {
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q8_0:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K: return true;
    }
    return false;
}

uint32_t ggml_block_values(GgmlType type) {
    switch (type) {
        case GgmlType::F32:
        case GgmlType::F16: return 1;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K: return 256;  // QK_K
        default: return 32;               // QK4_0, QK4_1, QK5_0, QK5_1, QK8_0
    }
}

// ggml-common.h: d (and m) are fp16; K-quants carry a super-block scale d (and dmin) and 6-bit sub-block scales.
uint32_t ggml_block_bytes(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return 4;
        case GgmlType::F16: return 2;
        case GgmlType::Q4_0: return 2 + 16;                 // d, 32 nibbles
        case GgmlType::Q4_1: return 2 + 2 + 16;             // d, m, 32 nibbles
        case GgmlType::Q5_0: return 2 + 4 + 16;             // d, qh (32 high bits), 32 nibbles
        case GgmlType::Q5_1: return 2 + 2 + 4 + 16;         // d, m, qh, 32 nibbles
        case GgmlType::Q8_0: return 2 + 32;                 // d, 32 int8
        case GgmlType::Q4_K: return 2 + 2 + 12 + 128;       // d, dmin, scales, 256 nibbles
        case GgmlType::Q5_K: return 2 + 2 + 12 + 32 + 128;  // d, dmin, scales, qh, 256 nibbles
        case GgmlType::Q6_K: return 128 + 64 + 16 + 2;      // ql, qh, int8 scales, d
    }
    return 0;
}

template <typename T>
bool GgufArray<T>::append(const T* values, size_t n) {
    static_assert(std::is_trivially_copyable<T>::value, "GgufArray holds plain data");
    if (n == 0) return true;  // data_ may still be null, which memcpy/memset must not see
    if (n > SIZE_MAX / sizeof(T) - size_) return false;
    if (size_ + n > capacity_) {
        size_t capacity = std::max<size_t>(16, size_ + n);
        if (capacity_ <= SIZE_MAX / sizeof(T) / 2) capacity = std::max(capacity, 2 * capacity_);
        T* grown = static_cast<T*>(std::realloc(data_, capacity * sizeof(T)));
        if (!grown) return false;
        data_ = grown;
        capacity_ = capacity;
    }
    if (values) std::memcpy(data_ + size_, values, n * sizeof(T));
    else std::memset(static_cast<void*>(data_ + size_), 0, n * sizeof(T));
    size_ += n;
    return true;
}

template class GgufArray<char>;
template class GgufArray<uint32_t>;
template class GgufArray<uint64_t>;
template class GgufArray<GgufTensor>;

std::string_view GgufStringList::operator[](size_t i) const {
    const uint64_t begin = i ? ends_[i - 1] : 0;
    return std::string_view(bytes_.data() + begin, size_t(ends_[i] - begin));
}

bool GgufStringList::start() {
    const uint64_t end = bytes_.size();
    return ends_.append(&end, 1);
}

bool GgufStringList::extend(const uint8_t* bytes, size_t n) {
    if (!bytes_.append(reinterpret_cast<const char*>(bytes), n)) return false;
    ends_[ends_.size() - 1] = bytes_.size();
    return true;
}

void GgufStringList::clear() {
    bytes_.clear();
    ends_.clear();
}

GgufReader::GgufReader(GgufSink* sink, uint64_t file_size) : sink_(sink), file_size_(file_size) {}

bool GgufReader::fail(const std::string& message) {
    error_ = "model.gguf: " + message;
    return false;
}

bool GgufReader::no_memory(uint64_t bytes, const std::string& what) {
    error_kind_ = ErrorKind::memory;
    return out_of_memory(bytes, what, &error_);
}

void GgufReader::expect_field(Step step, size_t bytes) {
    step_ = step;
    mode_ = Mode::field;
    field_size_ = bytes;
    field_fill_ = 0;
}

void GgufReader::expect_bytes(Step step, uint64_t bytes, GgufStringList* keep_into) {
    step_ = step;
    mode_ = keep_into ? Mode::keep : Mode::skip;
    keep_ = keep_into;
    remaining_ = bytes;
    if (bytes == 0) on_bytes_done();
}

bool GgufReader::feed(const uint8_t* bytes, size_t n) {
    if (failed()) return false;
    if (file_size_ != kGgufUnknownFileSize && n > file_size_ - fed_)
        return fail("more bytes arrived than the announced file size (" + u64(file_size_) + " bytes)");
    while (n > 0 && !failed()) {
        size_t used;
        if (mode_ == Mode::data) {
            used = feed_data(bytes, n);
        } else if (mode_ == Mode::field) {
            used = std::min(n, field_size_ - field_fill_);
            std::memcpy(field_ + field_fill_, bytes, used);
            field_fill_ += used;
        } else {
            used = size_t(std::min<uint64_t>(n, remaining_));
            if (mode_ == Mode::keep && !keep_->extend(bytes, used))
                return no_memory(keep_->total_bytes() + used, "the GGUF metadata");
            remaining_ -= used;
        }
        fed_ += used;
        bytes += used;
        n -= used;
        if (mode_ == Mode::field && field_fill_ == field_size_) {
            uint64_t value = 0;
            for (size_t i = field_size_; i-- > 0;) value = (value << 8) | field_[i];
            on_field(value);
        } else if ((mode_ == Mode::keep || mode_ == Mode::skip) && remaining_ == 0) {
            on_bytes_done();
        }
    }
    return !failed();
}

bool GgufReader::finish() {
    if (failed()) return false;
    if (mode_ != Mode::data || next_ < order_.size())
        return fail("the file ended at byte " + u64(fed_) + ", inside " + where());
    return true;
}

std::string GgufReader::current_key() const { return quoted(keys_[keys_.size() - 1]); }

std::string GgufReader::where() const {
    switch (step_) {
        case Step::magic:
        case Step::version:
        case Step::tensor_count:
        case Step::metadata_count: return "the header";
        case Step::key_length:
        case Step::key: return "the key of metadata entry " + u64(entry_);
        case Step::value_type:
        case Step::scalar:
        case Step::string_length:
        case Step::string:
        case Step::array_type:
        case Step::array_count:
        case Step::array_skip:
        case Step::element_length:
        case Step::element: return "the value of key " + current_key();
        case Step::name_length:
        case Step::name:
        case Step::n_dims:
        case Step::dim:
        case Step::tensor_type:
        case Step::tensor_offset: return "tensor info " + u64(info_.tensors.size());
        case Step::data: break;
    }
    const GgufTensor& tensor = info_.tensors[order_[next_]];
    const std::string name = quoted(info_.tensor_name(order_[next_]));
    if (fed_ < info_.data_offset + tensor.offset) return "the padding before tensor " + name;
    return "tensor " + name + " (" + u64(tensor_pos_) + " of " + u64(tensor.bytes) + " bytes)";
}

bool GgufReader::on_field(uint64_t value) {
    switch (step_) {
        case Step::magic:
            if (std::memcmp(field_, "GGUF", 4) != 0)
                return fail("not a GGUF file: it starts with " +
                            quoted(std::string_view(reinterpret_cast<const char*>(field_), 4)) + ", not 'GGUF'");
            expect_field(Step::version, 4);
            return true;
        case Step::version:
            if (value != 3) return fail("unsupported GGUF version " + u64(value) + " (only 3 is read)");
            expect_field(Step::tensor_count, 8);
            return true;
        case Step::tensor_count:
            if (value > kGgufMaxTensors)
                return fail("tensor count " + u64(value) + " exceeds the limit of " + u64(kGgufMaxTensors));
            tensor_count_ = value;
            expect_field(Step::metadata_count, 8);
            return true;
        case Step::metadata_count:
            if (value > kGgufMaxMetadata)
                return fail("metadata count " + u64(value) + " exceeds the limit of " + u64(kGgufMaxMetadata));
            metadata_count_ = value;
            return next_entry();
        case Step::key_length:
            if (value > kGgufMaxKeyBytes)
                return fail("the key of metadata entry " + u64(entry_) + " is " + u64(value) + " bytes, over the " +
                            u64(kGgufMaxKeyBytes) + "-byte limit");
            if (value > kGgufMaxAllKeyBytes - keys_.total_bytes())
                return fail("the metadata keys exceed the " + u64(kGgufMaxAllKeyBytes) + "-byte limit");
            if (!keys_.start()) return no_memory(keys_.size() * 8, "the GGUF metadata keys");
            expect_bytes(Step::key, value, &keys_);
            return true;
        case Step::value_type: return start_value(uint32_t(value));
        case Step::scalar:
            if (kept_key_ >= 0 && !check_kept_scalar(value)) return false;
            return end_value();
        case Step::string_length:
            if (kept_key_ < 0) {
                expect_bytes(Step::string, value, nullptr);
                return true;
            }
            if (value > kGgufMaxStringValueBytes)
                return fail("key " + current_key() + ": the string is " + u64(value) + " bytes, over the " +
                            u64(kGgufMaxStringValueBytes) + "-byte limit");
            string_value_.clear();
            if (!string_value_.start()) return no_memory(8, "the GGUF metadata");
            expect_bytes(Step::string, value, &string_value_);
            return true;
        case Step::array_type:
            if (value == kArray) return fail("key " + current_key() + ": nested arrays are not supported");
            if (value >= kValueTypeCount)
                return fail("key " + current_key() + ": array of unknown value type " + u64(value));
            if (kept_key_ >= 0 && value != kKeptKeys[kept_key_].element_type)
                return fail("key " + current_key() + " is an array of " + value_type_name(uint32_t(value)) +
                            ", expected an array of " + value_type_name(kKeptKeys[kept_key_].element_type));
            element_type_ = uint32_t(value);
            expect_field(Step::array_count, 8);
            return true;
        case Step::array_count:
            if (element_type_ == kString) {
                if (kept_key_ >= 0 && value > kGgufMaxTokens)
                    return fail("key " + current_key() + " has " + u64(value) + " entries, over the limit of " +
                                u64(kGgufMaxTokens));
                elements_left_ = value;
                return next_element();
            }
            if (value > UINT64_MAX / value_size(element_type_))
                return fail("key " + current_key() + ": the size of " + u64(value) + " " +
                            value_type_name(element_type_) + " values overflows");
            expect_bytes(Step::array_skip, value * value_size(element_type_), nullptr);
            return true;
        case Step::element_length: {
            if (kept_key_ < 0) {
                expect_bytes(Step::element, value, nullptr);
                return true;
            }
            GgufStringList& list = kept_key_ == kTokens ? info_.tokens : info_.merges;
            if (value > kGgufMaxTokenListBytes - list.total_bytes())
                return fail("key " + current_key() + " holds more than " + u64(kGgufMaxTokenListBytes) + " bytes");
            if (!list.start()) return no_memory((list.size() + 1) * 8, "the GGUF vocabulary");
            expect_bytes(Step::element, value, &list);
            return true;
        }
        case Step::name_length:
            if (value > kGgufMaxTensorNameBytes)
                return fail("tensor info " + u64(info_.tensors.size()) + ": the name is " + u64(value) +
                            " bytes, over the " + u64(kGgufMaxTensorNameBytes) + "-byte limit");
            if (!info_.tensor_names.start())
                return no_memory((info_.tensor_names.size() + 1) * 8, "the GGUF tensor names");
            tensor_ = GgufTensor();
            tensor_.name = uint32_t(info_.tensor_names.size() - 1);
            expect_bytes(Step::name, value, &info_.tensor_names);
            return true;
        case Step::n_dims:
            if (value < 1 || value > kGgufMaxDims)
                return fail("tensor " + quoted(info_.tensor_names[tensor_.name]) + " has " + u64(value) +
                            " dimensions (1 to " + u64(kGgufMaxDims) + " are supported)");
            tensor_.n_dims = uint32_t(value);
            tensor_.n_elements = 1;
            dims_read_ = 0;
            expect_field(Step::dim, 8);
            return true;
        case Step::dim: {
            const std::string who = "tensor " + quoted(info_.tensor_names[tensor_.name]);
            if (value == 0) return fail(who + ": dimension " + u64(dims_read_) + " is 0");
            if (value > kMaxElements / tensor_.n_elements)
                return fail(who + ": the element count overflows (dimension " + u64(dims_read_) + " is " + u64(value) +
                            ")");
            tensor_.n_elements *= value;
            tensor_.ne[dims_read_++] = value;
            if (dims_read_ < tensor_.n_dims) expect_field(Step::dim, 8);
            else expect_field(Step::tensor_type, 4);
            return true;
        }
        case Step::tensor_type: {
            const std::string name = quoted(info_.tensor_names[tensor_.name]);
            if (!ggml_type_known(uint32_t(value))) {
                const char* type_name = ggml_type_name(uint32_t(value));
                return fail("unsupported tensor type " + u64(value) +
                            (type_name ? " (" + std::string(type_name) + ")" : std::string()) + " in tensor " + name);
            }
            tensor_.type = GgmlType(value);
            const uint64_t block = ggml_block_values(tensor_.type);
            if (tensor_.ne[0] % block != 0)
                return fail("tensor " + name + ": ne[0] = " + u64(tensor_.ne[0]) + " is not a multiple of " +
                            ggml_type_name(uint32_t(value)) + "'s block of " + u64(block) + " values");
            tensor_.bytes = tensor_.n_elements / block * ggml_block_bytes(tensor_.type);  // <= 2^50: no overflow
            expect_field(Step::tensor_offset, 8);
            return true;
        }
        case Step::tensor_offset: {
            const std::string name = quoted(info_.tensor_names[tensor_.name]);
            if (value % info_.alignment != 0)
                return fail("tensor " + name + ": offset " + u64(value) + " is not a multiple of the alignment (" +
                            u64(info_.alignment) + ")");
            uint64_t end;
            if (value > UINT64_MAX - tensor_.bytes || !align_up(value + tensor_.bytes, info_.alignment, &end))
                return fail("tensor " + name + ": offset " + u64(value) + " + " + u64(tensor_.bytes) +
                            " bytes overflows");
            tensor_.offset = value;
            if (!info_.tensors.append(&tensor_, 1))
                return no_memory((info_.tensors.size() + 1) * sizeof(GgufTensor), "the GGUF tensor infos");
            return next_tensor_info();
        }
        default: return true;  // no other step reads a field
    }
}

bool GgufReader::on_bytes_done() {
    switch (step_) {
        case Step::key: {
            kept_key_ = find_kept_key(keys_[keys_.size() - 1]);
            if (kept_key_ >= 0) {
                if (seen_ & (1u << kept_key_)) return fail("duplicate key " + current_key());
                seen_ |= 1u << kept_key_;
            }
            expect_field(Step::value_type, 4);
            return true;
        }
        case Step::string:
            if (kept_key_ >= 0 && !check_kept_string()) return false;
            return end_value();
        case Step::array_skip: return end_value();
        case Step::element: return next_element();
        case Step::name: expect_field(Step::n_dims, 4); return true;
        default: return true;  // no other step reads bytes
    }
}

bool GgufReader::next_entry() {
    if (entry_ == metadata_count_) return end_metadata();
    expect_field(Step::key_length, 8);
    return true;
}

bool GgufReader::start_value(uint32_t type) {
    if (type >= kValueTypeCount) return fail("key " + current_key() + " has unknown value type " + u64(type));
    if (kept_key_ >= 0 && type != kKeptKeys[kept_key_].type)
        return fail("key " + current_key() + " has type " + value_type_name(type) + ", expected " +
                    value_type_name(kKeptKeys[kept_key_].type));
    if (type == kString) expect_field(Step::string_length, 8);
    else if (type == kArray) expect_field(Step::array_type, 4);
    else expect_field(Step::scalar, size_t(value_size(type)));
    return true;
}

bool GgufReader::next_element() {
    if (elements_left_ == 0) return end_value();
    elements_left_--;
    expect_field(Step::element_length, 8);
    return true;
}

bool GgufReader::end_value() {
    entry_++;
    return next_entry();
}

bool GgufReader::check_kept_scalar(uint64_t value) {
    const uint32_t u = uint32_t(value);
    switch (kept_key_) {
        case kContextLength: info_.context_length = u; break;
        case kEmbeddingLength: info_.embedding_length = u; break;
        case kBlockCount: info_.block_count = u; break;
        case kHeadCount: info_.head_count = u; break;
        case kFeedForwardLength: info_.feed_forward_length = u; break;
        case kLayerNormEpsilon: std::memcpy(&info_.layer_norm_epsilon, &u, 4); break;
        case kEosTokenId: info_.eos_token_id = u; break;
        case kBosTokenId:
            info_.bos_token_id = u;
            info_.has_bos_token_id = true;
            break;
        case kAlignment:
            if (u == 0 || (u & (u - 1)) != 0) return fail("general.alignment " + u64(u) + " is not a power of two");
            if (u > kGgufMaxAlignment)
                return fail("general.alignment " + u64(u) + " exceeds the limit of " + u64(kGgufMaxAlignment));
            info_.alignment = u;
            break;
        default: break;
    }
    return true;
}

bool GgufReader::check_kept_string() {
    const std::string_view value = string_value_[0];
    if (kept_key_ == kArchitecture && value != "gpt2")
        return fail("architecture " + quoted(value) + " is not supported (only gpt2 is read)");
    if (kept_key_ == kTokenizerModel && value != "gpt2")
        return fail("tokenizer.ggml.model " + quoted(value) + " is not supported (only gpt2 is read)");
    return true;
}

// All keys have been read: none twice, every required one there, the token ids in the vocabulary.
bool GgufReader::end_metadata() {
    GgufArray<uint32_t> by_key;
    if (!by_key.append(nullptr, keys_.size())) return no_memory(keys_.size() * 4, "the GGUF key check");
    for (size_t i = 0; i < keys_.size(); i++) by_key[i] = uint32_t(i);
    std::sort(by_key.data(), by_key.data() + by_key.size(),
              [this](uint32_t a, uint32_t b) { return keys_[a] != keys_[b] ? keys_[a] < keys_[b] : a < b; });
    for (size_t i = 1; i < by_key.size(); i++)
        if (keys_[by_key[i]] == keys_[by_key[i - 1]]) return fail("duplicate key " + quoted(keys_[by_key[i]]));
    for (int i = 0; i < kKeptKeyCount; i++)
        if (kKeptKeys[i].required && !(seen_ & (1u << i)))
            return fail("missing key '" + std::string(kKeptKeys[i].name) + "'");
    const size_t n_vocab = info_.tokens.size();
    if (info_.eos_token_id >= n_vocab)
        return fail("tokenizer.ggml.eos_token_id " + u64(info_.eos_token_id) + " is not a token (there are " +
                    u64(n_vocab) + ")");
    if (info_.has_bos_token_id && info_.bos_token_id >= n_vocab)
        return fail("tokenizer.ggml.bos_token_id " + u64(info_.bos_token_id) + " is not a token (there are " +
                    u64(n_vocab) + ")");
    return next_tensor_info();
}

bool GgufReader::next_tensor_info() {
    if (info_.tensors.size() == tensor_count_) return end_tensor_infos();
    expect_field(Step::name_length, 8);
    return true;
}

// All tensor infos have been read: names unique; in offset order the tensors neither overlap nor leave more
// than alignment padding between them (a file hides nothing in the data section, as ggml's writer lays it out).
bool GgufReader::end_tensor_infos() {
    const size_t n = info_.tensors.size();
    GgufArray<uint32_t> by_name;
    if (!by_name.append(nullptr, n) || !order_.append(nullptr, n)) return no_memory(n * 8, "the GGUF tensor checks");
    for (size_t i = 0; i < n; i++) by_name[i] = order_[i] = uint32_t(i);
    auto name = [this](uint32_t i) { return info_.tensor_name(i); };
    std::sort(by_name.data(), by_name.data() + n,
              [&](uint32_t a, uint32_t b) { return name(a) != name(b) ? name(a) < name(b) : a < b; });
    for (size_t i = 1; i < n; i++)
        if (name(by_name[i]) == name(by_name[i - 1])) return fail("duplicate tensor " + quoted(name(by_name[i])));
    const GgufTensor* tensors = info_.tensors.data();
    std::sort(order_.data(), order_.data() + n, [tensors](uint32_t a, uint32_t b) {
        return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset : a < b;
    });
    uint64_t end = 0;  // of the tensors so far, in the data section
    for (size_t i = 0; i < n; i++) {
        const GgufTensor& tensor = tensors[order_[i]];
        uint64_t next_start = 0;  // where the tensor should start; no overflow (checked with its offset)
        align_up(end, info_.alignment, &next_start);
        if (tensor.offset < end)
            return fail("tensors " + quoted(name(order_[i - 1])) + " and " + quoted(name(order_[i])) + " overlap");
        if (tensor.offset > next_start)
            return fail("the data section has a gap: bytes [" + u64(next_start) + ", " + u64(tensor.offset) +
                        ") before tensor " + quoted(name(order_[i])) + " belong to no tensor");
        end = tensor.offset + tensor.bytes;
    }
    info_.data_bytes = end;
    return start_data();
}

// The data section starts at the next multiple of the alignment; the file ends at the latest with the last
// tensor's padding.
bool GgufReader::start_data() {
    uint64_t padded_bytes;
    if (!align_up(fed_, info_.alignment, &info_.data_offset) ||
        !align_up(info_.data_bytes, info_.alignment, &padded_bytes) || padded_bytes > UINT64_MAX - info_.data_offset)
        return fail("the data section's size overflows");
    data_end_ = info_.data_offset + padded_bytes;
    if (file_size_ != kGgufUnknownFileSize) {
        const size_t n = order_.size();
        if (n > 0 && info_.data_offset + info_.data_bytes > file_size_)
            return fail("tensor " + quoted(info_.tensor_name(order_[n - 1])) + " ends at byte " +
                        u64(info_.data_offset + info_.data_bytes) + ", past the end of the file (" + u64(file_size_) +
                        " bytes)");
        if (file_size_ > data_end_) return trailing_bytes();
    }
    step_ = Step::data;
    mode_ = Mode::data;
    return sink_->on_header(info_, &error_) || sink_failed();
}

bool GgufReader::sink_failed() {
    if (error_.empty()) fail("the tensor data was refused");  // a sink that gave no reason
    else error_kind_ = sink_->error_kind();
    return false;
}

bool GgufReader::trailing_bytes() {
    return fail("bytes after the tensor data: the file should end by byte " + u64(data_end_));
}

size_t GgufReader::feed_data(const uint8_t* bytes, size_t n) {
    if (next_ == order_.size()) {  // the last tensor's padding
        if (n > data_end_ - fed_) trailing_bytes();
        return n;
    }
    const size_t index = order_[next_];
    const GgufTensor& tensor = info_.tensors[index];
    const uint64_t start = info_.data_offset + tensor.offset;
    if (fed_ < start) return size_t(std::min<uint64_t>(n, start - fed_));  // padding before the tensor
    const size_t used = size_t(std::min<uint64_t>(n, tensor.bytes - tensor_pos_));
    if (!sink_->on_tensor_bytes(index, tensor_pos_, bytes, used, &error_)) {
        sink_failed();
        return used;
    }
    tensor_pos_ += used;
    if (tensor_pos_ == tensor.bytes) {
        next_++;
        tensor_pos_ = 0;
    }
    return used;
}

}  // namespace gpt2
