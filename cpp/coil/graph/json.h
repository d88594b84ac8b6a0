// graph::Json — a small JSON value, parser and dumper for coil's graph files.
//
// A value is null, bool, int64, double, string, array or object. Objects keep their keys in
// insertion order (so dumps are deterministic and match what was read) and never hold the same key
// twice. Numbers without a fraction or exponent are int64; all others are double.
//
// parse_json is strict RFC 8259 JSON: no comments, no trailing commas, no NaN/Infinity literals,
// strings must be valid UTF-8, integers must fit in int64, duplicate object keys are rejected, and
// nesting deeper than kMaxJsonDepth is rejected. Errors throw JsonError whose message starts with
// "line:column: ".
//
// dump_json writes compact JSON (indent < 0) or indented JSON, in which an array or object whose
// one-line form fits in the line is kept on one line. Non-finite doubles cannot be dumped (JSON has
// no spelling for them); invalid UTF-8 in strings is written as U+FFFD.
//
// Tests: tests/cpp/graph/json_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coil::graph {

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Deeper nesting is refused by the parser (it recurses once per level).
inline constexpr int kMaxJsonDepth = 256;

class Json {
 public:
  enum class Type : uint8_t { Null, Bool, Int, Double, String, Array, Object };

  Json() = default;                               // null
  Json(std::nullptr_t) {}                         // NOLINT(google-explicit-constructor)
  Json(bool v) : type_(Type::Bool), b_(v) {}      // NOLINT
  Json(int v) : type_(Type::Int), i_(v) {}        // NOLINT
  Json(int64_t v) : type_(Type::Int), i_(v) {}    // NOLINT
  Json(double v) : type_(Type::Double), d_(v) {}  // NOLINT
  Json(std::string v) : type_(Type::String), s_(std::move(v)) {}  // NOLINT
  Json(const char* v) : type_(Type::String), s_(v) {}             // NOLINT

  static Json array(std::vector<Json> items = {});
  static Json object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_double() const { return type_ == Type::Double; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Accessors throw JsonError when the value has another type.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // ints convert
  const std::string& as_string() const;

  // Arrays: elements. Objects: values, in key order (keys() gives the matching keys).
  const std::vector<Json>& items() const;
  const std::vector<std::string>& keys() const;
  size_t size() const { return items_.size(); }

  // Arrays only.
  void push_back(Json v);
  // Objects only. set() replaces the value of an existing key, else appends the key.
  void set(std::string key, Json v);
  const Json* find(std::string_view key) const;  // nullptr when absent

  // Structural equality; object key order matters. Doubles compare by value (NaN never appears
  // in parsed JSON).
  bool operator==(const Json& o) const;

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0.0;
  std::string s_;
  std::vector<Json> items_;
  std::vector<std::string> keys_;  // objects: parallel to items_
};

const char* json_type_name(Json::Type t);  // "null", "bool", "integer", "number", ...

Json parse_json(std::string_view text);
std::string dump_json(const Json& v, int indent = -1);

// The shortest decimal text that parses back to exactly v, spelled as Python's repr(float):
// "1.0", "0.1", "1e-05", "1e+16", "-0.0"; "inf", "-inf", "nan" for non-finite values.
std::string format_double(double v);

}  // namespace coil::graph
