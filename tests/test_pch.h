// The precompiled header of every test binary (CMakeLists.txt): the headers
// nearly every test source includes, parsed once per build instead of once
// per source. Sources still include what they use.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
