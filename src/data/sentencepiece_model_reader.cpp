// sentencepiece's tokenizer.model (a ModelProto protobuf) -> SentencePieceTokenizer. A small
// protobuf wire-format reader takes the fields that decide encoding (sentencepiece_model.proto):
//   ModelProto      1 pieces, 2 trainer_spec, 3 normalizer_spec
//   SentencePiece   1 piece, 2 score, 3 type
//   TrainerSpec     3 model_type, 24 treat_whitespace_as_suffix, 35 byte_fallback,
//                   40 unk_id, 41 bos_id, 42 eos_id
//   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
//                   4 remove_extra_whitespaces, 5 escape_whitespaces
// Every other field is skipped. Absent fields take the .proto defaults, which are not zero for
// several of them (model_type unigram, unk/bos/eos 0/1/2, the three normalizer flags true).
#include <cstring>

#include "core/error.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

class WireReader {
 public:
  WireReader(std::string_view buf, const std::string& name) : buf_(buf), name_(name) {}
  bool done() const { return pos_ == buf_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == buf_.size()) bad("truncated varint");
      uint8_t b = uint8_t(buf_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes");
  }
  // (field number, wire type)
  std::pair<uint64_t, int> tag() {
    uint64_t t = varint();
    if ((t >> 3) == 0) bad("field number 0");
    return {t >> 3, int(t & 7)};
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (n > buf_.size() - pos_) bad("length " + std::to_string(n) + " runs past the end");
    std::string_view s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  float fixed32_float() {
    if (buf_.size() - pos_ < 4) bad("truncated fixed32");
    float f;
    std::memcpy(&f, buf_.data() + pos_, 4);
    pos_ += 4;
    return f;
  }
  void skip(int wire) {
    switch (wire) {
      case 0: varint(); return;
      case 1:
        if (buf_.size() - pos_ < 8) bad("truncated fixed64");
        pos_ += 8;
        return;
      case 2: bytes(); return;
      case 5: fixed32_float(); return;
      default: bad("unsupported wire type " + std::to_string(wire));
    }
  }
  // Checks the wire type of a known field.
  void expect(int wire, int want, const char* field) {
    if (wire != want) bad(std::string(field) + " has wire type " + std::to_string(wire));
  }
  [[noreturn]] void bad(const std::string& why) const {
    fail(name_ + ": malformed sentencepiece model (" + why + " at byte " + std::to_string(pos_) + ")");
  }

 private:
  std::string_view buf_;
  size_t pos_ = 0;
  const std::string& name_;
};

struct Trainer {
  uint64_t model_type = 1;  // UNIGRAM
  bool byte_fallback = false, whitespace_suffix = false;
  int32_t unk = 0, bos = 1, eos = 2;
};
struct Normalizer {
  std::string name;
  bool charsmap = false, dummy_prefix = true, squeeze = true, escape = true;
};

using Type = SentencePieceTokenizer::PieceType;

void read_piece(std::string_view msg, SentencePieceTokenizer::Vocab& v, const std::string& name) {
  WireReader r(msg, name);
  std::string piece;
  float score = 0;
  uint64_t type = 1;  // NORMAL
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (field == 1) r.expect(wire, 2, "piece"), piece = std::string(r.bytes());
    else if (field == 2) r.expect(wire, 5, "score"), score = r.fixed32_float();
    else if (field == 3) r.expect(wire, 0, "type"), type = r.varint();
    else r.skip(wire);
  }
  const std::string where = name + ": piece " + std::to_string(v.pieces.size()) + " '" + piece + "'";
  if (score != score) fail(where + " has a NaN score");
  switch (type) {
    case 1: v.types.push_back(Type::normal); break;
    case 2: v.types.push_back(Type::unknown); break;
    case 3: v.types.push_back(Type::control); break;
    case 4: v.types.push_back(Type::user_defined); break;
    case 6: v.types.push_back(Type::byte); break;
    case 5: fail(where + " is of type UNUSED, which is not supported");
    default: fail(where + " has unknown type " + std::to_string(type));
  }
  v.pieces.push_back(std::move(piece));
  v.scores.push_back(score);
}

// A message repeated in the file merges into the earlier one, as protobuf parsers do.
void read_trainer(std::string_view msg, Trainer& t, const std::string& name) {
  WireReader r(msg, name);
  auto id = [&](int wire, const char* what) {
    r.expect(wire, 0, what);
    return int32_t(uint32_t(r.varint()));  // int32 fields: negative values are 64-bit varints
  };
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (field == 3) r.expect(wire, 0, "model_type"), t.model_type = r.varint();
    else if (field == 24) r.expect(wire, 0, "treat_whitespace_as_suffix"), t.whitespace_suffix = r.varint();
    else if (field == 35) r.expect(wire, 0, "byte_fallback"), t.byte_fallback = r.varint();
    else if (field == 40) t.unk = id(wire, "unk_id");
    else if (field == 41) t.bos = id(wire, "bos_id");
    else if (field == 42) t.eos = id(wire, "eos_id");
    else r.skip(wire);
  }
}

void read_normalizer(std::string_view msg, Normalizer& n, const std::string& name) {
  WireReader r(msg, name);
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (field == 1) r.expect(wire, 2, "name"), n.name = std::string(r.bytes());
    else if (field == 2) r.expect(wire, 2, "precompiled_charsmap"), n.charsmap = !r.bytes().empty();
    else if (field == 3) r.expect(wire, 0, "add_dummy_prefix"), n.dummy_prefix = r.varint();
    else if (field == 4) r.expect(wire, 0, "remove_extra_whitespaces"), n.squeeze = r.varint();
    else if (field == 5) r.expect(wire, 0, "escape_whitespaces"), n.escape = r.varint();
    else r.skip(wire);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> read_sentencepiece_model(std::string_view content, const std::string& name) {
  WireReader r(content, name);
  SentencePieceTokenizer::Vocab v;
  Trainer t;
  Normalizer n;
  while (!r.done()) {
    auto [field, wire] = r.tag();
    if (field == 1) {
      r.expect(wire, 2, "pieces");
      if (v.pieces.size() > size_t(kMaxTokenId)) fail(name + ": too many pieces");
      read_piece(r.bytes(), v, name);
    } else if (field == 2) {
      r.expect(wire, 2, "trainer_spec"), read_trainer(r.bytes(), t, name);
    } else if (field == 3) {
      r.expect(wire, 2, "normalizer_spec"), read_normalizer(r.bytes(), n, name);
    } else {
      r.skip(wire);
    }
  }
  if (v.pieces.empty()) fail(name + ": sentencepiece model has no pieces");
  const char* types[] = {"?", "unigram", "BPE", "word", "char"};
  if (t.model_type != 2)
    fail(name + ": sentencepiece model type " + (t.model_type < 5 ? types[t.model_type] : "?") +
         " is not supported (only BPE, as Llama 2, Mistral and TinyLlama use)");
  if (!t.byte_fallback)
    fail(name + ": sentencepiece model without byte_fallback is not supported (it cannot encode every text)");
  if (t.whitespace_suffix) fail(name + ": treat_whitespace_as_suffix is not supported");
  if (!n.escape) fail(name + ": escape_whitespaces=false is not supported");
  if (n.charsmap)
    fail(name + ": normalization rule '" + n.name + "' is not supported (only identity, as Llama 2 uses)");
  v.unk = t.unk;
  v.bos = t.bos;
  v.eos = t.eos;
  v.add_dummy_prefix = n.dummy_prefix;
  v.remove_extra_whitespaces = n.squeeze;
  return std::make_unique<SentencePieceTokenizer>(std::move(v), name);
}

}  // namespace mt
