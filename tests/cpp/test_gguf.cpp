// gpt2::GgufReader, the streaming GGUF v3 reader: what it keeps of a valid file, that every chunking (1 byte,
// random sizes, the whole file) gives the same result, and the exact error of each kind of bad file.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

// Records what the reader hands on: the header once, then each tensor's bytes, which must arrive in order.
class RecordingSink : public gpt2::GgufSink {
   public:
    bool on_header(const gpt2::GgufModelInfo& info, std::string*) override {
        EXPECT_FALSE(header_seen);
        header_seen = true;
        tensor_bytes.assign(info.tensors.size(), {});
        return true;
    }
    bool on_tensor_bytes(size_t tensor, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                         std::string* error) override {
        EXPECT_TRUE(header_seen);
        EXPECT_EQ(byte_offset, tensor_bytes[tensor].size());
        EXPECT_GT(n, 0u);
        tensor_bytes[tensor].insert(tensor_bytes[tensor].end(), bytes, bytes + n);
        if (stop_at_tensor == tensor) {
            *error = "model.gguf: the sink stopped";
            return false;
        }
        return true;
    }
    bool header_seen = false;
    std::vector<std::vector<uint8_t>> tensor_bytes;
    size_t stop_at_tensor = SIZE_MAX;
};

enum class Chunking { whole, one_byte, random };
const Chunking kChunkings[] = {Chunking::whole, Chunking::one_byte, Chunking::random};

struct ReadResult {
    std::string error;  // empty when the file was read
    std::vector<std::vector<uint8_t>> tensor_bytes;
};

// Feeds file in pieces to a reader; the result and, through *reader, what it kept.
ReadResult read_gguf(const std::vector<uint8_t>& file, Chunking chunking, RecordingSink* sink,
                     gpt2::GgufReader* reader) {
    std::mt19937 rng(7);
    size_t offset = 0;
    bool ok = true;
    while (ok && offset < file.size()) {
        size_t n = file.size() - offset;
        if (chunking == Chunking::one_byte) n = 1;
        if (chunking == Chunking::random) n = std::min<size_t>(n, 1 + rng() % 97);
        ok = reader->feed(file.data() + offset, n);
        offset += n;
    }
    if (ok) reader->finish();
    return {reader->error(), sink->tensor_bytes};
}

ReadResult read_gguf(const std::vector<uint8_t>& file, Chunking chunking = Chunking::whole, bool size_known = true) {
    RecordingSink sink;
    gpt2::GgufReader reader(&sink, size_known ? file.size() : gpt2::kGgufUnknownFileSize);
    return read_gguf(file, chunking, &sink, &reader);
}

// Every chunking, with the file size announced or not, fails with exactly this message.
void expect_error(const std::vector<uint8_t>& file, const std::string& message) {
    for (bool size_known : {true, false})
        for (Chunking chunking : kChunkings)
            EXPECT_EQ(read_gguf(file, chunking, size_known).error, message)
                << "chunking " << int(chunking) << ", size known " << size_known;
}

void expect_error(const GgufFile& file, const std::string& message) { expect_error(build_gguf(file), message); }

GgufKeyValue& find_key(GgufFile& file, const std::string& key) {
    for (GgufKeyValue& kv : file.metadata)
        if (kv.key == key) return kv;
    ADD_FAILURE() << "no key " << key;
    return file.metadata[0];
}

void remove_key(GgufFile& file, const std::string& key) {
    file.metadata.erase(std::remove_if(file.metadata.begin(), file.metadata.end(),
                                       [&key](const GgufKeyValue& kv) { return kv.key == key; }),
                        file.metadata.end());
}

// The file with its u32 (version) or u64 field at byte offset replaced.
std::vector<uint8_t> with_u64_at(std::vector<uint8_t> file, size_t offset, uint64_t value) {
    std::memcpy(file.data() + offset, &value, 8);
    return file;
}

std::vector<uint8_t> truncated(const std::vector<uint8_t>& file, size_t n) {
    return std::vector<uint8_t>(file.begin(), file.begin() + n);
}

// The offset of the first occurrence of text in file.
size_t find_text(const std::vector<uint8_t>& file, const std::string& text) {
    return size_t(std::search(file.begin(), file.end(), text.begin(), text.end()) - file.begin());
}

}  // namespace

TEST(Gguf, BlockSizesAreGgmlsPublishedLayouts) {
    using gpt2::GgmlType;
    const struct {
        GgmlType type;
        uint32_t values, bytes;
    } expected[] = {{GgmlType::F32, 1, 4},     {GgmlType::F16, 1, 2},      {GgmlType::Q4_0, 32, 18},
                    {GgmlType::Q4_1, 32, 20},  {GgmlType::Q5_0, 32, 22},   {GgmlType::Q5_1, 32, 24},
                    {GgmlType::Q8_0, 32, 34},  {GgmlType::Q4_K, 256, 144}, {GgmlType::Q5_K, 256, 176},
                    {GgmlType::Q6_K, 256, 210}};
    for (const auto& e : expected) {
        EXPECT_EQ(gpt2::ggml_block_values(e.type), e.values) << gpt2::ggml_type_name(uint32_t(e.type));
        EXPECT_EQ(gpt2::ggml_block_bytes(e.type), e.bytes) << gpt2::ggml_type_name(uint32_t(e.type));
    }
}

TEST(Gguf, AValidFileGivesItsHyperParametersTokenizerTensorInfosAndBytes) {
    const GgufFile spec = tiny_gguf();
    const std::vector<uint8_t> file = build_gguf(spec);
    RecordingSink sink;
    gpt2::GgufReader reader(&sink, file.size());
    const ReadResult result = read_gguf(file, Chunking::whole, &sink, &reader);
    ASSERT_EQ(result.error, "");
    const gpt2::GgufModelInfo& info = reader.info();
    EXPECT_EQ(info.context_length, 8u);
    EXPECT_EQ(info.embedding_length, 32u);
    EXPECT_EQ(info.block_count, 1u);
    EXPECT_EQ(info.head_count, 2u);
    EXPECT_EQ(info.feed_forward_length, 128u);
    EXPECT_EQ(info.layer_norm_epsilon, 1e-5f);
    EXPECT_EQ(info.eos_token_id, 3u);
    EXPECT_TRUE(info.has_bos_token_id);
    EXPECT_EQ(info.bos_token_id, 3u);
    ASSERT_EQ(info.tokens.size(), 4u);
    EXPECT_EQ(info.tokens[0], "a");
    EXPECT_EQ(info.tokens[2], "ab");
    EXPECT_EQ(info.tokens[3], "<|endoftext|>");
    ASSERT_EQ(info.merges.size(), 2u);
    EXPECT_EQ(info.merges[0], "a b");
    EXPECT_EQ(info.merges[1], "ab ab");
    EXPECT_EQ(info.alignment, 32u);
    EXPECT_EQ(info.data_offset % 32, 0u);
    ASSERT_EQ(info.tensors.size(), spec.tensors.size());
    for (size_t i = 0; i < spec.tensors.size(); i++) {
        const gpt2::GgufTensor& t = info.tensors[i];
        EXPECT_EQ(info.tensor_name(i), spec.tensors[i].name);
        EXPECT_EQ(t.n_dims, spec.tensors[i].ne.size());
        for (size_t d = 0; d < 4; d++) EXPECT_EQ(t.ne[d], d < spec.tensors[i].ne.size() ? spec.tensors[i].ne[d] : 1);
        EXPECT_EQ(uint32_t(t.type), spec.tensors[i].type);
        EXPECT_EQ(t.bytes, spec.tensors[i].bytes.size());
        EXPECT_EQ(t.offset % 32, 0u);
        EXPECT_EQ(result.tensor_bytes[i], spec.tensors[i].bytes) << spec.tensors[i].name;
    }
    EXPECT_EQ(info.tensors[1].n_elements, 256u);
}

TEST(Gguf, EveryChunkingGivesTheSameBytesWithTheSizeKnownOrNot) {
    const GgufFile spec = tiny_gguf();
    const std::vector<uint8_t> file = build_gguf(spec);
    for (bool size_known : {true, false})
        for (Chunking chunking : kChunkings) {
            const ReadResult result = read_gguf(file, chunking, size_known);
            ASSERT_EQ(result.error, "");
            for (size_t i = 0; i < spec.tensors.size(); i++) EXPECT_EQ(result.tensor_bytes[i], spec.tensors[i].bytes);
        }
}

TEST(Gguf, TensorsArriveInOffsetOrderWhateverTheInfoOrderAndNoPaddingIsNeededAtTheEnd) {
    GgufFile spec = tiny_gguf();
    spec.tensors[0].offset = 1600;  // token_embd after the others: 1024 + 64 (pad 1088) + 288 (pad 1376) + 210
    spec.tensors[1].offset = 0;
    spec.tensors[2].offset = 1024;
    spec.tensors[3].offset = 1088;
    spec.tensors[4].offset = 1376;
    std::vector<uint8_t> file = build_gguf(spec);
    file.resize(file.size() - (32 - 4 * 34 % 32));  // the last tensor's padding left out
    const ReadResult result = read_gguf(file, Chunking::one_byte, false);
    ASSERT_EQ(result.error, "");
    for (size_t i = 0; i < spec.tensors.size(); i++) EXPECT_EQ(result.tensor_bytes[i], spec.tensors[i].bytes);
}

TEST(Gguf, AFileWithoutTensorsIsReadWhenItEndsAfterTheInfos) {
    GgufFile spec = tiny_gguf();
    spec.tensors.clear();
    EXPECT_EQ(read_gguf(build_gguf(spec, false), Chunking::one_byte, false).error, "");
}

TEST(Gguf, AnotherAlignmentPlacesTheDataThere) {
    GgufFile spec = tiny_gguf();
    spec.alignment = 64;
    spec.metadata.push_back(gguf_u32("general.alignment", 64));
    const std::vector<uint8_t> file = build_gguf(spec);
    RecordingSink sink;
    gpt2::GgufReader reader(&sink, gpt2::kGgufUnknownFileSize);
    ASSERT_EQ(read_gguf(file, Chunking::random, &sink, &reader).error, "");
    EXPECT_EQ(reader.info().alignment, 64u);
    EXPECT_EQ(reader.info().data_offset % 64, 0u);
    EXPECT_EQ(sink.tensor_bytes[4], spec.tensors[4].bytes);
}

TEST(Gguf, ASinkErrorStopsTheReaderWithTheSinksMessage) {
    const std::vector<uint8_t> file = build_gguf(tiny_gguf());
    RecordingSink sink;
    sink.stop_at_tensor = 2;
    gpt2::GgufReader reader(&sink, file.size());
    EXPECT_FALSE(reader.feed(file.data(), file.size()));
    EXPECT_EQ(reader.error(), "model.gguf: the sink stopped");
    EXPECT_FALSE(reader.feed(file.data(), 1));
    EXPECT_TRUE(sink.tensor_bytes[3].empty());
}

TEST(Gguf, RejectsAFileThatIsNotGguf) {
    std::vector<uint8_t> file = build_gguf(tiny_gguf());
    file[1] = 'X';
    expect_error(file, "model.gguf: not a GGUF file: it starts with 'GXUF', not 'GGUF'");
    expect_error(std::vector<uint8_t>{'<', '!', 'D', 'O', 'C'},
                 "model.gguf: not a GGUF file: it starts with '<!DO', not 'GGUF'");
}

TEST(Gguf, RejectsVersionsOtherThan3) {
    for (uint32_t version : {1u, 2u, 4u, 0x03000000u}) {
        GgufFile spec = tiny_gguf();
        spec.version = version;
        expect_error(spec, "model.gguf: unsupported GGUF version " + std::to_string(version) + " (only 3 is read)");
    }
}

TEST(Gguf, NamesWhereATruncatedFileEnds) {
    const std::vector<uint8_t> file = build_gguf(tiny_gguf());
    const std::string ended = "model.gguf: the file ended at byte ";
    expect_error(truncated(file, 0), ended + "0, inside the header");
    expect_error(truncated(file, 3), ended + "3, inside the header");
    expect_error(truncated(file, 20), ended + "20, inside the header");
    expect_error(truncated(file, 24), ended + "24, inside the key of metadata entry 0");
    expect_error(truncated(file, 30), ended + "30, inside the key of metadata entry 0");
    const size_t name_value = find_text(file, "tiny");  // general.name's string
    expect_error(truncated(file, name_value + 2),
                 ended + std::to_string(name_value + 2) + ", inside the value of key 'general.name'");
    const size_t tokens = find_text(file, "<|endoftext|>");
    expect_error(truncated(file, tokens),
                 ended + std::to_string(tokens) + ", inside the value of key 'tokenizer.ggml.tokens'");
    const size_t info = find_text(file, "position_embd.weight");
    expect_error(truncated(file, info + 30), ended + std::to_string(info + 30) + ", inside tensor info 1");
}

TEST(Gguf, ATruncatedDataSectionIsFoundAtTheHeaderWhenTheSizeIsKnownElseWhenTheFileEnds) {
    const std::vector<uint8_t> whole = build_gguf(tiny_gguf());
    const std::vector<uint8_t> infos = build_gguf(tiny_gguf(), false);
    RecordingSink sink;
    gpt2::GgufReader reader(&sink);
    ASSERT_TRUE(reader.feed(whole.data(), whole.size()));
    const uint64_t data_offset = reader.info().data_offset;
    // in the padding before the data
    const std::vector<uint8_t> in_padding = truncated(whole, infos.size() + 1);
    EXPECT_EQ(read_gguf(in_padding, Chunking::one_byte, false).error,
              "model.gguf: the file ended at byte " + std::to_string(infos.size() + 1) +
                  ", inside the padding before tensor 'token_embd.weight'");
    EXPECT_EQ(read_gguf(in_padding, Chunking::whole, true).error,
              "model.gguf: tensor 'blk.0.ffn_down.weight' ends at byte " + std::to_string(data_offset + 1536 + 210) +
                  ", past the end of the file (" + std::to_string(infos.size() + 1) + " bytes)");
    // inside a tensor
    const std::vector<uint8_t> in_tensor = truncated(whole, data_offset + 160 + 100);
    for (Chunking chunking : kChunkings)
        EXPECT_EQ(read_gguf(in_tensor, chunking, false).error,
                  "model.gguf: the file ended at byte " + std::to_string(data_offset + 260) +
                      ", inside tensor 'position_embd.weight' (100 of 1024 bytes)");
}

TEST(Gguf, RejectsBytesAfterTheLastTensorsPadding) {
    std::vector<uint8_t> file = build_gguf(tiny_gguf());
    const std::string message = "model.gguf: bytes after the tensor data: the file should end by byte " +
                                std::to_string(file.size());
    file.push_back(0);
    expect_error(file, message);
}

TEST(Gguf, RejectsMoreBytesThanAnnounced) {
    const std::vector<uint8_t> file = build_gguf(tiny_gguf());
    RecordingSink sink;
    gpt2::GgufReader reader(&sink, 10);
    EXPECT_FALSE(reader.feed(file.data(), 11));
    EXPECT_EQ(reader.error(), "model.gguf: more bytes arrived than the announced file size (10 bytes)");
}

TEST(Gguf, RejectsCountsOverTheirLimits) {
    const std::vector<uint8_t> file = build_gguf(tiny_gguf());
    expect_error(with_u64_at(file, 8, UINT64_MAX),
                 "model.gguf: tensor count 18446744073709551615 exceeds the limit of 65536");
    expect_error(with_u64_at(file, 8, 65537), "model.gguf: tensor count 65537 exceeds the limit of 65536");
    expect_error(with_u64_at(file, 16, UINT64_MAX),
                 "model.gguf: metadata count 18446744073709551615 exceeds the limit of 65536");
    // a key length of 2^64 - 1
    expect_error(with_u64_at(file, 24, UINT64_MAX),
                 "model.gguf: the key of metadata entry 0 is 18446744073709551615 bytes, over the 65535-byte limit");
}

TEST(Gguf, RejectsOverflowingOrZeroDimensionsAndBadDimensionCounts) {
    GgufFile spec = tiny_gguf();
    spec.tensors[1].ne = {1ull << 32, 1ull << 32};
    expect_error(spec,
                 "model.gguf: tensor 'position_embd.weight': the element count overflows (dimension 1 is 4294967296)");
    spec.tensors[1].ne = {UINT64_MAX};
    expect_error(
        spec,
        "model.gguf: tensor 'position_embd.weight': the element count overflows (dimension 0 is 18446744073709551615)");
    spec.tensors[1].ne = {32, 0};
    expect_error(spec, "model.gguf: tensor 'position_embd.weight': dimension 1 is 0");
    spec.tensors[1].ne = {32, 8, 1, 1, 1};
    expect_error(spec, "model.gguf: tensor 'position_embd.weight' has 5 dimensions (1 to 4 are supported)");
    spec.tensors[1].ne = {};
    expect_error(spec, "model.gguf: tensor 'position_embd.weight' has 0 dimensions (1 to 4 are supported)");
}

TEST(Gguf, RejectsMisalignedOverlappingGappedAndOverflowingOffsets) {
    GgufFile spec = tiny_gguf();
    spec.tensors[1].offset = 144;
    expect_error(spec, "model.gguf: tensor 'position_embd.weight': offset 144 is not a multiple of the alignment (32)");
    spec.tensors[1].offset = 128;
    expect_error(spec, "model.gguf: tensors 'token_embd.weight' and 'position_embd.weight' overlap");
    spec.tensors[1].offset = 192;
    expect_error(
        spec,
        "model.gguf: the data section has a gap: bytes [160, 192) before tensor 'position_embd.weight' belong to no tensor");
    spec = tiny_gguf();
    spec.tensors[0].offset = 32;
    spec.tensors[1].offset = 1u << 20;
    expect_error(
        build_gguf(spec, false),
        "model.gguf: the data section has a gap: bytes [0, 32) before tensor 'token_embd.weight' belong to no tensor");
    spec.tensors[0].offset = UINT64_MAX - 31;
    expect_error(build_gguf(spec, false),
                 "model.gguf: tensor 'token_embd.weight': offset 18446744073709551584 + 136 bytes overflows");
}

TEST(Gguf, RejectsUnsupportedTensorTypesByTheirGgmlName) {
    GgufFile spec = tiny_gguf();
    spec.tensors[2].type = 10;
    expect_error(spec, "model.gguf: unsupported tensor type 10 (Q2_K) in tensor 'output_norm.weight'");
    spec.tensors[2].type = 30;
    expect_error(spec, "model.gguf: unsupported tensor type 30 (BF16) in tensor 'output_norm.weight'");
    spec.tensors[2].type = 20;
    expect_error(spec, "model.gguf: unsupported tensor type 20 (IQ4_NL) in tensor 'output_norm.weight'");
    spec.tensors[2].type = 4;
    expect_error(spec, "model.gguf: unsupported tensor type 4 (Q4_2) in tensor 'output_norm.weight'");
    spec.tensors[2].type = 1000;
    expect_error(spec, "model.gguf: unsupported tensor type 1000 in tensor 'output_norm.weight'");
}

TEST(Gguf, RejectsARowLengthThatIsNotWholeBlocks) {
    GgufFile spec = tiny_gguf();
    spec.tensors[3].ne = {128, 4};
    expect_error(
        spec, "model.gguf: tensor 'blk.0.ffn_up.weight': ne[0] = 128 is not a multiple of Q4_K's block of 256 values");
    spec = tiny_gguf();
    spec.tensors[0].ne = {48, 4};
    expect_error(spec,
                 "model.gguf: tensor 'token_embd.weight': ne[0] = 48 is not a multiple of Q8_0's block of 32 values");
}

TEST(Gguf, RejectsAnAlignmentThatIsNotAPowerOfTwoUpTo1MiB) {
    for (uint32_t alignment : {0u, 24u, 1u << 21}) {
        GgufFile spec = tiny_gguf();
        spec.metadata.insert(spec.metadata.begin(), gguf_u32("general.alignment", alignment));
        expect_error(spec, "model.gguf: general.alignment " + std::to_string(alignment) +
                               (alignment == 1u << 21 ? " exceeds the limit of 1048576" : " is not a power of two"));
    }
}

TEST(Gguf, RejectsDuplicateKeysAndTensors) {
    GgufFile spec = tiny_gguf();
    spec.metadata.push_back(gguf_string("general.name", "again"));
    expect_error(spec, "model.gguf: duplicate key 'general.name'");
    spec = tiny_gguf();
    spec.metadata.push_back(gguf_u32("gpt2.block_count", 2));
    expect_error(spec, "model.gguf: duplicate key 'gpt2.block_count'");
    spec = tiny_gguf();
    spec.tensors[3].name = "token_embd.weight";
    expect_error(spec, "model.gguf: duplicate tensor 'token_embd.weight'");
}

TEST(Gguf, RejectsKeptKeysOfTheWrongType) {
    GgufFile spec = tiny_gguf();
    find_key(spec, "gpt2.block_count") = {"gpt2.block_count", 5, gguf_u32_bytes(1)};
    expect_error(spec, "model.gguf: key 'gpt2.block_count' has type i32, expected u32");
    spec = tiny_gguf();
    find_key(spec, "gpt2.attention.layer_norm_epsilon") = {"gpt2.attention.layer_norm_epsilon", 12, gguf_u64_bytes(0)};
    expect_error(spec, "model.gguf: key 'gpt2.attention.layer_norm_epsilon' has type f64, expected f32");
    spec = tiny_gguf();
    find_key(spec, "general.architecture") = gguf_u32("general.architecture", 2);
    expect_error(spec, "model.gguf: key 'general.architecture' has type u32, expected string");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.tokens") = gguf_string("tokenizer.ggml.tokens", "a");
    expect_error(spec, "model.gguf: key 'tokenizer.ggml.tokens' has type string, expected array");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.tokens") = gguf_array("tokenizer.ggml.tokens", 5, 1, gguf_u32_bytes(0));
    expect_error(spec, "model.gguf: key 'tokenizer.ggml.tokens' is an array of i32, expected an array of string");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.merges") = gguf_array("tokenizer.ggml.merges", 0, 1, {0});
    expect_error(spec, "model.gguf: key 'tokenizer.ggml.merges' is an array of u8, expected an array of string");
}

TEST(Gguf, RejectsOtherArchitecturesAndTokenizers) {
    GgufFile spec = tiny_gguf();
    find_key(spec, "general.architecture") = gguf_string("general.architecture", "llama");
    expect_error(spec, "model.gguf: architecture 'llama' is not supported (only gpt2 is read)");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.model") = gguf_string("tokenizer.ggml.model", "llama");
    expect_error(spec, "model.gguf: tokenizer.ggml.model 'llama' is not supported (only gpt2 is read)");
}

TEST(Gguf, RequiresTheHyperParametersTokenizerAndAnEosTokenInTheVocabulary) {
    for (const char* key :
         {"general.architecture", "gpt2.feed_forward_length", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id"}) {
        GgufFile spec = tiny_gguf();
        remove_key(spec, key);
        expect_error(spec, "model.gguf: missing key '" + std::string(key) + "'");
    }
    GgufFile spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.eos_token_id") = gguf_u32("tokenizer.ggml.eos_token_id", 4);
    expect_error(spec, "model.gguf: tokenizer.ggml.eos_token_id 4 is not a token (there are 4)");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.bos_token_id") = gguf_u32("tokenizer.ggml.bos_token_id", 7);
    expect_error(spec, "model.gguf: tokenizer.ggml.bos_token_id 7 is not a token (there are 4)");
    spec = tiny_gguf();
    remove_key(spec, "tokenizer.ggml.bos_token_id");
    RecordingSink sink;
    const std::vector<uint8_t> file = build_gguf(spec);
    gpt2::GgufReader reader(&sink, file.size());
    EXPECT_EQ(read_gguf(file, Chunking::whole, &sink, &reader).error, "");
    EXPECT_FALSE(reader.info().has_bos_token_id);
}

TEST(Gguf, RejectsValuesOverTheirCapsAndMalformedValueTypes) {
    GgufFile spec = tiny_gguf();
    find_key(spec, "general.architecture") = gguf_string("general.architecture", std::string(257, 'g'));
    expect_error(spec, "model.gguf: key 'general.architecture': the string is 257 bytes, over the 256-byte limit");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.tokens") = gguf_array("tokenizer.ggml.tokens", 8, (1u << 20) + 1, {});
    expect_error(spec, "model.gguf: key 'tokenizer.ggml.tokens' has 1048577 entries, over the limit of 1048576");
    spec = tiny_gguf();
    find_key(spec, "tokenizer.ggml.merges") =
        gguf_array("tokenizer.ggml.merges", 8, 1, gguf_u64_bytes((16u << 20) + 1));
    expect_error(spec, "model.gguf: key 'tokenizer.ggml.merges' holds more than 16777216 bytes");
    spec = tiny_gguf();
    find_key(spec, "skipped.u16") = gguf_array("skipped.u16", 10, 1ull << 61, {});
    expect_error(spec, "model.gguf: key 'skipped.u16': the size of 2305843009213693952 u64 values overflows");
    spec = tiny_gguf();
    find_key(spec, "skipped.u16") = gguf_array("skipped.u16", 9, 1, {});
    expect_error(spec, "model.gguf: key 'skipped.u16': nested arrays are not supported");
    spec = tiny_gguf();
    find_key(spec, "skipped.u16") = gguf_array("skipped.u16", 13, 1, {});
    expect_error(spec, "model.gguf: key 'skipped.u16': array of unknown value type 13");
    spec = tiny_gguf();
    find_key(spec, "skipped.u16").type = 13;
    expect_error(spec, "model.gguf: key 'skipped.u16' has unknown value type 13");
    spec = tiny_gguf();
    spec.tensors[2].name = std::string(256, 't');
    expect_error(spec, "model.gguf: tensor info 2: the name is 256 bytes, over the 255-byte limit");
}

TEST(Gguf, SkippedStringsAndArraysMayBeLongAndNamesInMessagesStayOneLine) {
    GgufFile spec = tiny_gguf();
    find_key(spec, "general.name") = gguf_string("general.name", std::string(100000, 'n'));
    EXPECT_EQ(read_gguf(build_gguf(spec), Chunking::random, false).error, "");
    spec.tensors[2].name = "bad\nname";
    spec.tensors[2].type = 10;
    expect_error(spec, "model.gguf: unsupported tensor type 10 (Q2_K) in tensor 'bad\\u000Aname'");
}

// The fuzz seeds (tests/fuzz/corpus/gguf, written by tests/fuzz/make_gguf_corpus.py): every ok_* seed is read,
// every bad_* seed fails with exactly the message listed here; a seed without an entry fails the test.
TEST(Gguf, TheFuzzSeedsReadOrFailWithTheirMessages) {
    const std::map<std::string, std::string> bad = {
        {"bad_version_2", "model.gguf: unsupported GGUF version 2 (only 3 is read)"},
        {"bad_llama", "model.gguf: architecture 'llama' is not supported (only gpt2 is read)"},
        {"bad_q2_k", "model.gguf: unsupported tensor type 10 (Q2_K) in tensor 'x'"},
        {"bad_truncated",
         "model.gguf: the file ended at byte 1112, inside tensor 'output_norm.weight' (88 of 128 bytes)"},
    };
    const std::string dir = GPT2_FUZZ_CORPUS_DIR "/gguf/";
    DIR* listing = opendir(dir.c_str());
    ASSERT_NE(listing, nullptr) << dir;
    size_t seeds = 0;
    while (const dirent* entry = readdir(listing)) {
        const std::string file = entry->d_name;
        if (file.size() < 5 || file.compare(file.size() - 5, 5, ".gguf") != 0) continue;
        seeds++;
        const std::string name = file.substr(0, file.size() - 5);
        const std::string error = read_gguf(read_file(dir + file), Chunking::random, false).error;
        if (name.compare(0, 3, "ok_") == 0) EXPECT_EQ(error, "") << file;
        else if (bad.count(name)) EXPECT_EQ(error, bad.at(name)) << file;
        else ADD_FAILURE() << "no expected message for " << file << ": " << error;
    }
    closedir(listing);
    EXPECT_EQ(seeds, 9u);
}
