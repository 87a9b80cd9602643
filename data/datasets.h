/// @file
/// Where the real data sets live (docs/DATA.md).
///
/// `make data` (scripts/setup-data) prepares them in one directory outside the repository:
/// $TAPESTRY_DATA, or $HOME/.cache/tapestry/data when that is unset or empty. Each set is a folder
/// there (de-en, asterisk, fashion-mnist, brown, spam-assassin, mnist) that carries a `.stamp` file
/// once it is complete.
#pragma once

#include <string>

namespace tapestry::data {

/// $TAPESTRY_DATA, else $HOME/.cache/tapestry/data. Throws Error when both variables are unset.
std::string data_directory();

/// Whether scripts/setup-data has prepared the set `name` (its folder holds a `.stamp`).
bool dataset_prepared(const std::string& name);

/// data_directory()/name when prepared; otherwise throws Error naming the folder and `make data`.
std::string dataset_directory(const std::string& name);

}  // namespace tapestry::data
