// The tokenizer a GGUF file carries, as the Model keeps it (Model::vocabulary()), and the containers its lists are
// stored in. They are the model's, so the model needs no header of the file formats; the GGUF reader
// (engine/formats/gguf.h), which fills the lists, defines the containers' out-of-line members (engine/formats/gguf.cpp)
// beside the element types it instantiates them for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace gpt2 {

// A growable array of trivially copyable T in malloc'd memory: growth reports failure instead of throwing.
template <typename T>
class GgufArray {
   public:
    GgufArray() = default;
    GgufArray(const GgufArray&) = delete;
    GgufArray& operator=(const GgufArray&) = delete;
    ~GgufArray() { std::free(data_); }
    void swap(GgufArray& other) {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        std::swap(capacity_, other.capacity_);
    }
    // Appends n elements (or, values == nullptr, n zeroed ones); false when memory runs out.
    bool append(const T* values, size_t n);
    T* data() { return data_; }
    const T* data() const { return data_; }
    size_t size() const { return size_; }
    void clear() { size_ = 0; }
    T& operator[](size_t i) { return data_[i]; }
    const T& operator[](size_t i) const { return data_[i]; }

   private:
    T* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

// A list of byte strings stored back to back (tokens, merges, keys, tensor names).
class GgufStringList {
   public:
    size_t size() const { return ends_.size(); }
    std::string_view operator[](size_t i) const;
    uint64_t total_bytes() const { return bytes_.size(); }
    // Starts a new (empty) string / appends bytes to the last one; false when memory runs out.
    bool start();
    bool extend(const uint8_t* bytes, size_t n);
    void clear();
    void swap(GgufStringList& other) {
        bytes_.swap(other.bytes_);
        ends_.swap(other.ends_);
    }

   private:
    GgufArray<char> bytes_;     // (total_bytes) the strings' bytes
    GgufArray<uint64_t> ends_;  // (size) one past each string's last byte in bytes_
};

// The tokenizer a GGUF file carries, kept by the model it was loaded with (Model::vocabulary()).
struct Vocabulary {
    GgufStringList tokens;  // (n_vocab) tokenizer.ggml.tokens: GPT-2 byte-level BPE token strings, in id order
    GgufStringList merges;  // tokenizer.ggml.merges: "a b" pairs, highest priority first
    uint32_t eos_token_id = 0;
    bool has_bos_token_id = false;
    uint32_t bos_token_id = 0;
};

}  // namespace gpt2
