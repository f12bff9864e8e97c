// Counting a regular expression's matches in printed IR or PTX, for tests that check what a pass left behind.
#pragma once
#include <iterator>
#include <regex>
#include <string>

namespace tilejit::testing {

inline int count_matches(const std::string &text, const std::string &pattern) {
  const std::regex re(pattern);
  return int(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

}  // namespace tilejit::testing
