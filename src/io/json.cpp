// src/io/json.cpp - depth-limited JSON parsing and length-limited quoting of JSON values and strings
// read from files (see io/json.h).
#include "io/json.h"

#include <algorithm>

#include "aether/core/error.h"

namespace aether {

namespace {

// Thrown by the parser callback at the first container nested too deep; stops the parse at once.
struct TooDeep {};

// Parser messages quote the token read so far, which can be most of a hostile document.
constexpr size_t kMaxParserMessageChars = 240;

template <typename Json>
Json parse_limited(std::string_view text, const std::string& what,
                   const std::function<void(const std::string&)>& on_top_level_key, int max_depth) {
  // depth = the number of containers enclosing the event: 0 for the top-level value.
  const typename Json::parser_callback_t on_event = [&](int depth, typename Json::parse_event_t event,
                                                        Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw TooDeep{};
    if (on_top_level_key && depth == 1 && event == Json::parse_event_t::key && parsed.is_string())
      on_top_level_key(parsed.template get<std::string>());
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), on_event);
  } catch (const TooDeep&) {
    throw Error(
        detail::cat(what, " is nested deeper than ", max_depth, " levels (the limit for JSON aether reads)"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::cat(what, " is not valid JSON: ", text_excerpt(e.what(), kMaxParserMessageChars)));
  }
}

// Appends `v` as compact ASCII JSON to `out`, stopping soon after out.size() passes `budget`.
// Every level appends at least one character, so the recursion depth is at most budget + 1.
template <typename Json>
void render(const Json& v, int depth, size_t budget, std::string& out) {
  if (out.size() > budget) return;
  const auto quote = [&](std::string_view s) {
    const Json str(std::string(s.substr(0, budget + 1)));  // the rest would be cut anyway
    out += str.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  };
  switch (v.type()) {
    case nlohmann::json::value_t::object:
    case nlohmann::json::value_t::array: {
      const bool object = v.is_object();
      out += object ? '{' : '[';
      if (depth >= kMaxJsonDepth && !v.empty()) {
        out += "...";
      } else {
        bool first = true;
        for (auto it = v.begin(); it != v.end() && out.size() <= budget; ++it) {
          if (!first) out += ',';
          first = false;
          if (object) {
            quote(it.key());
            out += ':';
          }
          render(it.value(), depth + 1, budget, out);
        }
      }
      out += object ? '}' : ']';
      break;
    }
    case nlohmann::json::value_t::string: quote(v.template get_ref<const std::string&>()); break;
    case nlohmann::json::value_t::binary: out += "<binary>"; break;
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::boolean:
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
    case nlohmann::json::value_t::discarded: out += v.dump(); break;
  }
}

template <typename Json>
std::string excerpt(const Json& v, size_t max_chars) {
  max_chars = std::max<size_t>(max_chars, 4);
  std::string out;
  render(v, 1, max_chars, out);
  if (out.size() > max_chars) {
    out.resize(max_chars - 3);  // ASCII only: any cut is at a character boundary
    out += "...";
  }
  return out;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what, int max_depth) {
  return parse_limited<nlohmann::json>(text, what, {}, max_depth);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& what,
                                          const std::function<void(const std::string&)>& on_top_level_key) {
  return parse_limited<nlohmann::ordered_json>(text, what, on_top_level_key, kMaxJsonDepth);
}

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) { return excerpt(v, max_chars); }
std::string json_excerpt(const nlohmann::ordered_json& v, size_t max_chars) { return excerpt(v, max_chars); }

std::string quoted_line(std::string_view text, size_t max_chars) {
  std::string s;
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    s += c >= 0x20 && c < 0x7f ? char(c) : '?';  // one line, whatever was typed
  }
  if (text.size() > max_chars) s += "...";
  return "'" + s + "'";
}

std::string text_excerpt(std::string_view s, size_t max_chars) {
  max_chars = std::max<size_t>(max_chars, 4);
  if (s.size() <= max_chars) return std::string(s);
  size_t cut = max_chars - 3;
  while (cut > 0 && (uint8_t(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return std::string(s.substr(0, cut)) + "...";
}

}  // namespace aether
