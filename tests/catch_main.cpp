// Catch2 2.x needs one translation unit that provides main(); Catch2 3.x links Catch2WithMain.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
