// ctest runs each TEST_CASE by name (doctest_discover_tests), and the discovery splits a name at
// a ';' (a CMake list separator): the pieces are run as filters that match no test case, so
// the case "passes" with 0 assertions. No test name may hold one. A '[' without its ']' ("in
// [0, 1)") stops CMake's list splitting until a ']', so the discovery glued the next names onto
// it and ctest failed to load every test: brackets must pair up.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "test_util.h"

TEST_CASE("test names: no TEST_CASE name holds a semicolon or an unpaired bracket (ctest's discovery would split or glue names)") {
    const std::regex test_case(R"re(TEST_CASE\("((?:[^"\\]|\\.)*)")re");
    int names = 0;
    for (const char* sub : {"tests", "tests/firmware", "tests/cuda", "tests/device"}) {
        const std::filesystem::path dir = ember::test::source_dir() + "/" + sub;
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            if (e.path().extension() != ".cpp") continue;
            const std::string src = ember::test::read_file(e.path().string());
            for (std::sregex_iterator it(src.begin(), src.end(), test_case), end; it != end; ++it) {
                ++names;
                const std::string name = (*it)[1].str();
                CHECK_MESSAGE(name.find(';') == std::string::npos, e.path().filename().string() << ": \"" << name << "\"");
                int depth = 0;
                bool paired = true;
                for (const char c : name) {
                    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
                    paired = paired && depth >= 0;
                }
                CHECK_MESSAGE((paired && depth == 0), e.path().filename().string() << ": unpaired bracket in \"" << name << "\"");
            }
        }
    }
    CHECK(names > 100);  // the sources were found and read
}
