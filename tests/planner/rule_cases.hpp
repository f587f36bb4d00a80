#pragma once
// One failing and one passing configuration per rule (rule_cases.cpp).
#include <functional>
#include <vector>

#include "planner_test_util.hpp"

namespace epo::planner::test {

using Mutate = std::function<void(model::Config&, ValidationContext&)>;
struct RuleCase {
  const char* id;
  Mutate fail, pass;  ///< applied to the alltoall example and a default context
};

/// Every rule's cases.
std::vector<RuleCase> rule_cases();

}  // namespace epo::planner::test
