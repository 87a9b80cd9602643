/// @file
/// The text form of a config: a type name, then optional key=value settings after a colon,
///
///   radam:lr=2e-4,beta2=0.98      improved-clustered:clusters=15,topk=32      constant
///
/// split here once for every config that is chosen by a string (attentions, optimizers, schedules).
///
/// Every such config also shares one grammar for its keys: a type declares each key once, as a
/// ConfigKey (key, default, range, help, and names for a key whose values are named), and from that
/// table come parsing (parse_config_values), printing (print_config), range checks
/// (check_config_value) and help text (config_keys_help, config_defaults). Attention kinds
/// (nn/attention/config.h), optimizers and schedules (optim/config.h) declare their keys this way.
#pragma once

#include <cstdint>
#include <limits>
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

/// Which ends of a ConfigKey's range [min, max] belong to it.
enum class Ends {
  Closed,    ///< [min, max]
  LowOpen,   ///< (min, max]
  HighOpen,  ///< [min, max)
  Open       ///< (min, max)
};

/// What a ConfigKey's values are.
enum class KeyType {
  Integer,  ///< a whole number: "clusters=15", "warmup=4000"
  Number    ///< a finite number: "lr=2e-4"
};

/// One key of a config type: its default, its range and its help. When `names` is not empty the
/// values are those names ("losses=cosine"), stored as the name's index.
struct ConfigKey {
  std::string key;   ///< "clusters"
  double fallback;   ///< the value when the text leaves the key out
  ///@{
  /// The range parse_config_values accepts (Ends: which ends belong to it; max may be infinite).
  double min, max;
  ///@}
  std::string help;  ///< one phrase for help text: "C, query clusters"
  std::vector<std::string> names = {};  ///< the values by name, empty for numbers
  KeyType type = KeyType::Integer;      ///< ignored when `names` is set
  Ends ends = Ends::Closed;             ///< which ends of [min, max] are allowed
};

/// A number key (KeyType::Number) in [min, max] as `ends` says; max may be infinite.
ConfigKey number_key(std::string key, double fallback, double min, double max, Ends ends, std::string help);

/// The value of every key of `keys`, in their order: the defaults, overridden by `config`'s items.
/// Throws Error naming `op` for a key not in `keys` (naming `type` and its keys), and for a value that
/// is not of the key's type or out of its range (check_config_value).
std::vector<double> parse_config_values(const std::vector<ConfigKey>& keys, const ConfigText& config,
                                        const std::string& op);

/// Throws Error naming `op` and the key when `value` is not one of the key's values.
void check_config_value(const ConfigKey& key, double value, const std::string& op);

/// The index of `key` in `keys`, or -1.
int64_t find_config_key(const std::vector<ConfigKey>& keys, const std::string& key);

/// The key's values for help text: "[1, 65536]", "[0, 1)", "(0, inf)", "projected, printed, cosine".
std::string config_range(const ConfigKey& key);

/// `value` as the text parse_config_values reads back: the name of a named key, else the shortest
/// exact number (format_config_number).
std::string config_value_text(const ConfigKey& key, double value);

/// "type:key=value,..." with every key of `keys` whose value `shown` accepts (default: all), so that
/// parsing the text gives `values` again; just "type" when none is shown.
std::string print_config(const std::string& type, const std::vector<ConfigKey>& keys,
                        const std::vector<double>& values,
                        bool (*shown)(const ConfigKey& key, double value) = nullptr);

/// "key=default,..." for a one-line summary of a type ("" when it has no keys).
std::string config_defaults(const std::vector<ConfigKey>& keys);

/// One line per key, "<indent>key=default  (range) help".
std::string config_keys_help(const std::vector<ConfigKey>& keys, const std::string& indent);

/// `items` joined by ", "; "none" when there are none: for messages that list what is allowed.
std::string join_names(const std::vector<std::string>& items);

/// The shortest decimal text that reads back as exactly `value` ("0.0002", "1e-08", "4000"), so that
/// printing a config and parsing it again gives the same numbers.
std::string format_config_number(double value);

}  // namespace tapestry
