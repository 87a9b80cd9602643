/// @file
/// The text form of a config: a type name, then optional key=value settings after a colon,
///
///   radam:lr=2e-4,beta2=0.98      improved-clustered:clusters=15,topk=32      constant
///
/// split here once for every config that is chosen by a string (attentions, optimizers, schedules).
/// Each config checks its own keys and values; this checks the syntax.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tapestry {

/// A config string such as "improved-clustered:clusters=15,topk=32" split into its type and its
/// key=value settings.
struct ConfigText {
  std::string type;  ///< the part before ':'
  std::vector<std::pair<std::string, std::string>> items;  ///< in the order given
};

/// Splits `text`; throws Error naming `op` on an empty type, an empty item (a trailing ':' or ','), an
/// item without '=' or with an empty key or value, and a key given twice.
ConfigText split_config(const std::string& text, const std::string& op);

/// `value` as a finite double (the whole text), or Error naming op and key.
double parse_config_number(const std::string& value, const std::string& op, const std::string& key);

/// The shortest decimal text that reads back as exactly `value` ("0.0002", "1e-08", "4000"), so that
/// printing a config and parsing it again gives the same numbers.
std::string format_config_number(double value);

}  // namespace tapestry
