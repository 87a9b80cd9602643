#include "optim/param_groups.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/config_text.h"
#include "core/error.h"
#include "optim/optimizer.h"

namespace tapestry::optim {

namespace {

// `text` cut at every `separator` (an empty piece where two meet, or at either end).
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  for (size_t begin = 0;;) {
    const size_t end = text.find(separator, begin);
    pieces.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) return pieces;
    begin = end + 1;
  }
}

// "group 2 ('*.bias')": how messages name group k ≥ 1.
std::string group_name(const ParamGroupsConfig& config, size_t k) {
  return "group " + std::to_string(k) + " ('" + config.groups[k - 1].to_string() + "')";
}

// The name with each run of digits as '#': "encoder.layers.#.w_c" for every layer's w_c.
std::string kind_of(const std::string& name) {
  std::string kind;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(name[i]));
    if (!digit) kind += name[i];
    else if (i == 0 || !std::isdigit(static_cast<unsigned char>(name[i - 1]))) kind += '#';
  }
  return kind;
}

// A few of `names` to write a pattern from, in their order: first those with a last part not seen
// before ("weight", "bias", "w_c", "centroids"), then those of a kind not seen before (kind_of: one
// per module, not one per layer), so that the sample shows the kinds of parameter there are.
std::string sample_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 6;
  std::vector<bool> chosen(names.size(), false);
  std::set<std::string> last_parts, kinds;
  size_t shown = 0;
  for (size_t i = 0; i < names.size() && shown < kShown; ++i)
    if (last_parts.insert(names[i].substr(names[i].rfind('.') + 1)).second)
      chosen[i] = true, kinds.insert(kind_of(names[i])), ++shown;
  for (size_t i = 0; i < names.size() && shown < kShown; ++i)
    if (!chosen[i] && kinds.insert(kind_of(names[i])).second) chosen[i] = true, ++shown;
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    if (chosen[i]) out += (out.empty() ? "'" : ", '") + names[i] + "'";
  return out + (names.size() > shown ? ", ... (" + std::to_string(names.size()) + " in all)" : "");
}

GroupClip parse_clip(const std::string& value, const std::string& op) {
  if (value == "global") return {};
  if (value == "none") return {ClipPolicy::None, 0.0};
  char* end = nullptr;
  const double max_norm = std::strtod(value.c_str(), &end);
  TP_CHECK(end == value.c_str() + value.size() && std::isfinite(max_norm) && max_norm > 0, op,
           "clip must be global, none or a max norm > 0, got '", value, "'");
  return {ClipPolicy::Own, max_norm};
}

ParamGroupSpec parse_group(const std::string& text, const std::string& op) {
  TP_CHECK(!text.empty(), op, "is empty (a ';' with no group before or after it)");
  const size_t colon = text.find(':');
  ParamGroupSpec group;
  group.patterns = split(text.substr(0, colon), '|');
  for (const std::string& pattern : group.patterns) {
    TP_CHECK(!pattern.empty(), op, "has an empty name pattern (each pattern needs a character; '*' matches every ",
             "name)");
    TP_CHECK(std::none_of(pattern.begin(), pattern.end(), [](unsigned char c) { return std::isspace(c) || std::iscntrl(c); }),
             op, "pattern '", pattern, "' holds a space or a control character, which no parameter name has");
  }
  if (colon == std::string::npos) return group;
  // split_config checks the items' syntax (key=value, no key twice); the patterns stand in for the type.
  for (const auto& [key, value] : split_config("patterns" + text.substr(colon), op).items) {
    if (key == "lr") {
      group.lr = parse_config_number(value, op, key);
      detail::check_lr(op.c_str(), *group.lr);
    } else if (key == "weight_decay") {
      group.weight_decay = parse_config_number(value, op, key);
      detail::check_non_negative(op.c_str(), "weight_decay", *group.weight_decay);
    } else if (key == "clip") {
      group.clip = parse_clip(value, op);
    } else if (key == "rule") {
      TP_CHECK(value == "optimizer" || value == "sgd", op, "rule must be optimizer or sgd, got '", value, "'");
      group.rule = value == "sgd" ? GroupRule::Sgd : GroupRule::Optimizer;
    } else {
      fail(op, "'", key, "' is not a setting of a parameter group (settings: lr, weight_decay, clip, rule)");
    }
  }
  return group;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& name) {
  // Greedy with one backtrack point: on a mismatch, the last '*' takes one more character.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, resume = n;
    } else if (star != std::string::npos) {
      p = star + 1, n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ParamGroupSpec::matches(const std::string& name) const {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return glob_match(p, name); });
}

std::string ParamGroupSpec::to_string() const {
  std::string out;
  for (const std::string& pattern : patterns) out += (out.empty() ? "" : "|") + pattern;
  std::vector<std::string> items;
  if (lr) items.push_back("lr=" + format_config_number(*lr));
  if (weight_decay) items.push_back("weight_decay=" + format_config_number(*weight_decay));
  if (clip.policy == ClipPolicy::Own) items.push_back("clip=" + format_config_number(clip.max_norm));
  if (clip.policy == ClipPolicy::None) items.push_back("clip=none");
  if (rule == GroupRule::Sgd) items.push_back("rule=sgd");
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : ":") + items[i];
  return out;
}

ParamGroupsConfig ParamGroupsConfig::parse(const std::string& text) {
  const std::string op = "param groups '" + text + "'";
  ParamGroupsConfig config;
  if (text.empty()) return config;
  const std::vector<std::string> groups = split(text, ';');
  for (size_t k = 0; k < groups.size(); ++k)
    config.groups.push_back(parse_group(groups[k], op + ": group " + std::to_string(k + 1)));
  return config;
}

std::string ParamGroupsConfig::to_string() const {
  std::string out;
  for (size_t k = 0; k < groups.size(); ++k) out += (k ? ";" : "") + groups[k].to_string();
  return out;
}

std::vector<size_t> ParamGroupsConfig::assign(const std::vector<std::string>& names) const {
  const std::string op = "param groups '" + to_string() + "'";
  std::vector<size_t> group_of(names.size(), 0);
  std::vector<bool> used(groups.size() + 1, false);
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t k = 1; k <= groups.size(); ++k) {
      if (!groups[k - 1].matches(names[i])) continue;
      TP_CHECK(group_of[i] == 0, op, "parameter '", names[i], "' is matched by ", group_name(*this, group_of[i]),
               " and by ", group_name(*this, k), "; a parameter belongs to one group, so narrow a pattern");
      group_of[i] = k;
      used[k] = true;
    }
  }
  for (size_t k = 1; k <= groups.size(); ++k)
    TP_CHECK(used[k], op, group_name(*this, k), " matches no parameter; the parameters are named like ",
             sample_names(names));
  return group_of;
}

}  // namespace tapestry::optim
