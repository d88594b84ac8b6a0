#include "coil/graph/json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <unordered_set>

namespace coil::graph {

namespace {

[[noreturn]] void type_mismatch(const char* wanted, Json::Type seen) {
  throw JsonError(std::string("expected a JSON ") + wanted + ", found " + json_type_name(seen));
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not valid
// UTF-8 (overlong forms, surrogates and values above U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) -> unsigned { return k < s.size() ? uint8_t(s[k]) : 0x100u; };
  auto cont = [&](size_t k) { return byte(k) >= 0x80 && byte(k) <= 0xBF; };
  unsigned b0 = byte(i);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80;
    unsigned hi = b0 == 0xED ? 0x9F : 0xBF;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    return cont(i + 2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    unsigned lo = b0 == 0xF0 ? 0x90 : 0x80;
    unsigned hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    return cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// ---------------------------------------------------------------------------------------------
// Dumper

void dump_string(const std::string& s, std::string& out) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        append_utf8(out, 0xFFFD);
        ++i;
        continue;
      }
      out.append(s, i, n);
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      continue;
    }
    out += char(c);
  }
  out += '"';
}

void dump_scalar(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::Type::Null:
      out += "null";
      return;
    case Json::Type::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Json::Type::Int:
      out += std::to_string(v.as_int());
      return;
    case Json::Type::Double:
      if (!std::isfinite(v.as_double())) {
        throw JsonError("cannot write the non-finite number " + format_double(v.as_double()) +
                        " as JSON");
      }
      out += format_double(v.as_double());
      return;
    case Json::Type::String:
      dump_string(v.as_string(), out);
      return;
    case Json::Type::Array:
    case Json::Type::Object:
      break;
  }
  throw JsonError("dump_scalar called on a container");
}

class Dumper {
 public:
  explicit Dumper(int indent) : indent_(indent) {}

  std::string run(const Json& v) {
    if (indent_ < 0) {
      write_inline(v, std::numeric_limits<size_t>::max(), /*spaced=*/false, 0);
    } else {
      write_pretty(v, 0);
    }
    return std::move(out_);
  }

 private:
  static constexpr size_t kLineWidth = 100;

  static void check_depth(int depth) {
    if (depth >= kMaxJsonDepth) {
      throw JsonError("cannot write JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
    }
  }

  // `depth` counts the containers around v; v itself may be the kMaxJsonDepth-th.
  // Writes v on one line. Returns false (leaving partial output) as soon as the output grows
  // past `end`, so that measuring whether a container fits costs at most one line.
  bool write_inline(const Json& v, size_t end, bool spaced, int depth) {
    if (!v.is_array() && !v.is_object()) {
      dump_scalar(v, out_);
      return out_.size() <= end;
    }
    check_depth(depth);
    out_ += v.is_array() ? '[' : '{';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out_ += spaced ? ", " : ",";
      if (v.is_object()) {
        dump_string(v.keys()[i], out_);
        out_ += spaced ? ": " : ":";
      }
      if (!write_inline(v.items()[i], end, spaced, depth + 1)) return false;
    }
    out_ += v.is_array() ? ']' : '}';
    return out_.size() <= end;
  }

  size_t column() const {
    size_t nl = out_.rfind('\n');
    return nl == std::string::npos ? out_.size() : out_.size() - nl - 1;
  }

  void write_pretty(const Json& v, int depth) {
    bool container = v.is_array() || v.is_object();
    if (!container || v.size() == 0) {
      write_inline(v, std::numeric_limits<size_t>::max(), true, depth);
      return;
    }
    size_t start = out_.size();
    size_t col = column();
    size_t budget = col < kLineWidth ? kLineWidth - col : 0;
    if (write_inline(v, start + budget, /*spaced=*/true, depth)) return;
    out_.resize(start);

    std::string inner(size_t(indent_) * size_t(depth + 1), ' ');
    out_ += v.is_array() ? "[\n" : "{\n";
    for (size_t i = 0; i < v.size(); ++i) {
      out_ += inner;
      if (v.is_object()) {
        dump_string(v.keys()[i], out_);
        out_ += ": ";
      }
      write_pretty(v.items()[i], depth + 1);
      out_ += i + 1 < v.size() ? ",\n" : "\n";
    }
    out_.append(size_t(indent_) * size_t(depth), ' ');
    out_ += v.is_array() ? ']' : '}';
  }

  int indent_;
  std::string out_;
};

// ---------------------------------------------------------------------------------------------
// Parser

std::string describe_char(std::string_view text, size_t pos) {
  unsigned char c = text[pos];
  if (c >= 0x21 && c < 0x7F) return std::string("'") + char(c) + "'";
  static const char* kHex = "0123456789ABCDEF";
  std::string hex = {kHex[c >> 4], kHex[c & 0xF]};
  return "byte 0x" + hex;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ < text_.size()) {
      fail("unexpected " + describe_char(text_, pos_) + " after the end of the JSON value");
    }
    return v;
  }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& msg) const {
    size_t line = 1;
    size_t col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      unsigned char c = text_[i];
      if (c == '\n') {
        ++line;
        col = 1;
      } else if ((c & 0xC0) != 0x80) {  // count characters, not UTF-8 continuation bytes
        ++col;
      }
    }
    throw JsonError(std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(pos_, msg); }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  Json parse_value(int depth) {
    if (at_end()) fail("unexpected end of input; expected a JSON value");
    char c = peek();
    if (c == '{' || c == '[') {
      if (depth + 1 > kMaxJsonDepth) {
        fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
      return c == '{' ? parse_object(depth + 1) : parse_array(depth + 1);
    }
    if (c == '"') return Json(parse_string());
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    if (c == 't') return parse_literal("true", Json(true));
    if (c == 'f') return parse_literal("false", Json(false));
    if (c == 'n') return parse_literal("null", Json());
    fail("unexpected " + describe_char(text_, pos_) + "; expected a JSON value");
  }

  Json parse_literal(std::string_view word, Json value) {
    if (text_.substr(pos_, word.size()) != word) {
      fail("invalid literal; expected '" + std::string(word) + "'");
    }
    pos_ += word.size();
    return value;
  }

  Json parse_array(int depth) {
    ++pos_;  // '['
    Json arr = Json::array();
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      skip_ws();
      if (!at_end() && peek() == ']') fail("trailing ',' before ']' in array");
      arr.push_back(parse_value(depth));
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an array (missing ']')");
      if (peek() == ']') {
        ++pos_;
        return arr;
      }
      if (peek() != ',') fail("expected ',' or ']' in array, found " + describe_char(text_, pos_));
      ++pos_;
    }
  }

  Json parse_object(int depth) {
    ++pos_;  // '{'
    Json obj = Json::object();
    std::unordered_set<std::string> seen;
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an object (missing '}')");
      if (peek() == '}') fail("trailing ',' before '}' in object");
      if (peek() != '"') {
        fail("expected a string key in object, found " + describe_char(text_, pos_));
      }
      size_t key_pos = pos_;
      std::string key = parse_string();
      if (!seen.insert(key).second) fail_at(key_pos, "duplicate key \"" + key + "\" in object");
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an object (missing '}')");
      if (peek() != ':') fail("expected ':' after object key, found " + describe_char(text_, pos_));
      ++pos_;
      skip_ws();
      obj.set(std::move(key), parse_value(depth));
      skip_ws();
      if (at_end()) fail("unexpected end of input inside an object (missing '}')");
      if (peek() == '}') {
        ++pos_;
        return obj;
      }
      if (peek() != ',') fail("expected ',' or '}' in object, found " + describe_char(text_, pos_));
      ++pos_;
    }
  }

  uint32_t parse_hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) fail("unexpected end of input in \\u escape");
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        fail("expected 4 hex digits after \\u");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // After the 'u' of a \u escape; handles surrogate pairs.
  void parse_unicode_escape(std::string& out, size_t escape_pos) {
    uint32_t cp = parse_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(escape_pos, "unpaired low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") {
        fail_at(escape_pos, "high surrogate in \\u escape not followed by a low surrogate");
      }
      pos_ += 2;
      uint32_t lo = parse_hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) {
        fail_at(escape_pos, "high surrogate in \\u escape not followed by a low surrogate");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    append_utf8(out, cp);
  }

  std::string parse_string() {
    size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in string (must be escaped)");
      if (c >= 0x80) {
        size_t n = utf8_sequence_length(text_, pos_);
        if (n == 0) fail("invalid UTF-8 in string");
        out.append(text_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        out += char(c);
        ++pos_;
        continue;
      }
      size_t escape_pos = pos_;
      ++pos_;
      if (at_end()) fail_at(start, "unterminated string");
      char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          parse_unicode_escape(out, escape_pos);
          break;
        default:
          fail_at(escape_pos, "invalid escape sequence in string");
      }
    }
  }

  void skip_digits() {
    while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
  }
  bool at_digit() const { return !at_end() && peek() >= '0' && peek() <= '9'; }

  Json parse_number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!at_digit()) fail("expected a digit after '-'");
    if (peek() == '0') {
      ++pos_;
      if (at_digit()) fail_at(start, "numbers cannot have leading zeros");
    } else {
      skip_digits();
    }
    bool is_double = false;
    if (!at_end() && peek() == '.') {
      ++pos_;
      if (!at_digit()) fail("expected a digit after '.' in number");
      skip_digits();
      is_double = true;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!at_digit()) fail("expected a digit in number exponent");
      skip_digits();
      is_double = true;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    std::string spelled(first, last);
    if (!is_double) {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || ptr != last) {
        fail_at(start, "integer " + spelled + " does not fit in 64 bits");
      }
      return Json(v);
    }
    double d = 0.0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || ptr != last || !std::isfinite(d)) {
      fail_at(start, "number " + spelled + " is out of the range of a double");
    }
    return Json(d);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Json value

Json Json::array(std::vector<Json> items) {
  Json j;
  j.type_ = Type::Array;
  j.items_ = std::move(items);
  return j;
}

Json Json::object() {
  Json j;
  j.type_ = Type::Object;
  return j;
}

bool Json::as_bool() const {
  if (type_ != Type::Bool) type_mismatch("bool", type_);
  return b_;
}

int64_t Json::as_int() const {
  if (type_ != Type::Int) type_mismatch("integer", type_);
  return i_;
}

double Json::as_double() const {
  if (type_ == Type::Int) return double(i_);
  if (type_ != Type::Double) type_mismatch("number", type_);
  return d_;
}

const std::string& Json::as_string() const {
  if (type_ != Type::String) type_mismatch("string", type_);
  return s_;
}

const std::vector<Json>& Json::items() const {
  if (type_ != Type::Array && type_ != Type::Object) type_mismatch("array or object", type_);
  return items_;
}

const std::vector<std::string>& Json::keys() const {
  if (type_ != Type::Object) type_mismatch("object", type_);
  return keys_;
}

void Json::push_back(Json v) {
  if (type_ != Type::Array) type_mismatch("array", type_);
  items_.push_back(std::move(v));
}

void Json::set(std::string key, Json v) {
  if (type_ != Type::Object) type_mismatch("object", type_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] != key) continue;
    items_[i] = std::move(v);
    return;
  }
  keys_.push_back(std::move(key));
  items_.push_back(std::move(v));
}

const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) type_mismatch("object", type_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

bool Json::operator==(const Json& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null:
      return true;
    case Type::Bool:
      return b_ == o.b_;
    case Type::Int:
      return i_ == o.i_;
    case Type::Double:
      return d_ == o.d_;
    case Type::String:
      return s_ == o.s_;
    case Type::Array:
      return items_ == o.items_;
    case Type::Object:
      return keys_ == o.keys_ && items_ == o.items_;
  }
  return false;
}

const char* json_type_name(Json::Type t) {
  switch (t) {
    case Json::Type::Null:
      return "null";
    case Json::Type::Bool:
      return "bool";
    case Json::Type::Int:
      return "integer";
    case Json::Type::Double:
      return "number";
    case Json::Type::String:
      return "string";
    case Json::Type::Array:
      return "array";
    case Json::Type::Object:
      return "object";
  }
  return "?";
}

Json parse_json(std::string_view text) {
  return Parser(text).parse_document();
}

std::string dump_json(const Json& v, int indent) {
  return Dumper(indent).run(v);
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form ("-1.2345e+02"), then laid out as Python's
  // repr does: positional when -4 <= exponent < 16, scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, size_t(res.ptr - buf));
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos)) {
    if (c != '.') digits += c;
  }
  int exp = std::atoi(std::string(sci.substr(epos + 1)).c_str());

  if (exp < -4 || exp >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant += "." + digits.substr(1);
    std::string e = std::to_string(exp < 0 ? -exp : exp);
    if (e.size() < 2) e = "0" + e;
    return sign + mant + "e" + (exp < 0 ? "-" : "+") + e;
  }
  if (exp < 0) return sign + "0." + std::string(size_t(-exp - 1), '0') + digits;
  size_t int_len = size_t(exp) + 1;
  if (digits.size() <= int_len)
    return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

}  // namespace coil::graph
