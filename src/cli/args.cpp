// Checked command-line values (see args.h).
#include "args.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <vector>

#include "aether/core/error.h"
#include "aether/model/presets.h"
#include "io/json.h"

namespace aether::cli {
namespace fs = std::filesystem;

void add_text_option(CLI::App& cmd, const std::string& name, TextArg& arg, const std::string& help,
                     const std::string& type) {
  arg.option = cmd.add_option(name, arg.text, help)->type_name(type);
}

std::string shown(const std::string& text, size_t max_chars) { return quoted_line(text, max_chars); }

std::string preset_list(const std::string& last_sep) {
  const std::vector<std::string> names = preset_names();
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last_sep + " " : ", ") + names[i];
  return out;
}

int64_t parse_int(const std::string& command, const std::string& option, const std::string& text, int64_t lo,
                  int64_t hi) {
  std::string_view t = text;
  const bool plus = !t.empty() && t.front() == '+';
  if (plus) t.remove_prefix(1);
  bool digits = !t.empty() && !(plus && t.front() == '-');
  for (size_t i = 0; i < t.size(); ++i)
    digits = digits && ((t[i] >= '0' && t[i] <= '9') || (i == 0 && t[i] == '-' && t.size() > 1));
  AETHER_CHECK(digits, command, option, " ", shown(text), " is not an integer");
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  const bool negative = t.front() == '-';
  AETHER_CHECK(ec != std::errc::result_out_of_range || negative, command, option, " ", shown(text),
               " is too large (at most ", hi, ")");
  AETHER_CHECK(ec != std::errc::result_out_of_range, command, option, " ", shown(text),
               " is too small (at least ", lo, ")");
  AETHER_CHECK(ec == std::errc() && end == t.data() + t.size(), command, option, " ", shown(text),
               " is not an integer");
  AETHER_CHECK(v <= hi, command, option, " ", shown(text), " is too large (at most ", hi, ")");
  AETHER_CHECK(v >= lo, command, option, " ", shown(text), " is too small (at least ", lo, ")");
  return v;
}

uint64_t parse_uint64(const std::string& command, const std::string& option, const std::string& text) {
  std::string_view t = text;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  bool digits = !t.empty();
  for (char c : t) digits = digits && c >= '0' && c <= '9';
  AETHER_CHECK(digits, command, option, " ", shown(text), " is not a non-negative integer");
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  AETHER_CHECK(ec != std::errc::result_out_of_range, command, option, " ", shown(text),
               " is too large (at most ", std::numeric_limits<uint64_t>::max(), ")");
  AETHER_CHECK(ec == std::errc() && end == t.data() + t.size(), command, option, " ", shown(text),
               " is not a non-negative integer");
  return v;
}

double parse_positive_real(const std::string& command, const std::string& option, const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v =
      text.empty() || std::isspace(static_cast<unsigned char>(text[0])) ? 0 : std::strtod(begin, &end);
  const bool whole = !text.empty() && end == begin + text.size();
  AETHER_CHECK(whole, command, option, " ", shown(text), " is not a number");
  AETHER_CHECK(!(errno == ERANGE && std::isinf(v)), command, option, " ", shown(text), " is too large");
  AETHER_CHECK(std::isfinite(v), command, option, " ", shown(text), " is not a finite number");
  AETHER_CHECK(v > 0, command, option, " ", shown(text), " must be > 0");
  return v;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool eq = fs::equivalent(a, b, ec);
    if (!ec) return eq;
  }
  return fs::weakly_canonical(fs::absolute(a, ec), ec) == fs::weakly_canonical(fs::absolute(b, ec), ec);
}

}  // namespace aether::cli
