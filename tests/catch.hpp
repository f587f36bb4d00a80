#pragma once
// One include for Catch2 2.x and 3.x.
#if defined(EPO_CATCH3)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
