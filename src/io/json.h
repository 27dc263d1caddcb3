// src/io/json.h - (internal) parsing JSON read from files with a nesting limit, and quoting values read
// from files in error messages with a length limit (limits: aether/io/limits.h).
//
// Every JSON document aether reads from a file goes through parse_json / parse_ordered_json: a
// document nested deeper than kMaxJsonDepth is rejected while it is parsed, before a deep tree is
// built, so no later recursive walk (dump(), ==, module_from_config) can overflow the stack.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "aether/io/limits.h"

namespace aether {

// Parses `text`. Throws aether::Error "<what> is not valid JSON: <parser message>" or
// "<what> is nested deeper than 64 levels (the limit for JSON aether reads)". `what` names the
// document, e.g. "run.aether: manifest.json". A caller with a deeper format of its own (module
// configs: two levels per module) passes its max_depth and bounds the nesting itself.
nlohmann::json parse_json(std::string_view text, const std::string& what, int max_depth = kMaxJsonDepth);

// The same, keeping the document's key order. on_top_level_key, when set, is called with each
// key of the top-level object as it is read (duplicates included, which the result merges).
nlohmann::ordered_json parse_ordered_json(
    std::string_view text, const std::string& what,
    const std::function<void(const std::string&)>& on_top_level_key = {});

// `v` as compact JSON, cut to at most max_chars characters (ending in "..." when cut), ASCII only
// (other characters escaped). Costs O(max_chars + depth) whatever the size of `v`; values nested
// deeper than kMaxJsonDepth are shown as [...] / {...}. For quoting file contents in errors.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = kMaxQuotedChars);
std::string json_excerpt(const nlohmann::ordered_json& v, size_t max_chars = kMaxQuotedChars);

// A string read from a file (a tensor name, a key), cut to at most max_chars characters (ending
// in "..." when cut, never inside a UTF-8 sequence).
std::string text_excerpt(std::string_view s, size_t max_chars = kMaxQuotedChars);

// Text someone typed (a path, an option's value) in single quotes on one line: bytes outside
// printable ASCII as '?', at most max_chars of them (then "..." inside the quotes).
std::string quoted_line(std::string_view text, size_t max_chars);

}  // namespace aether
