// The README and docs/*.md link to files and to sections of one another, and name the
// repository's files in backticks. These tests check that every relative link and image path
// names a file of the repository, that every #anchor names a heading of the file it points
// into, as GitHub renders it, and that every repository path in backticks exists.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// A heading's anchor as GitHub makes it: lower case, spaces to '-', every character other
// than a letter, a digit, '-' or '_' dropped (bytes of non-ASCII characters are kept).
std::string github_slug(const std::string& heading) {
    std::string slug;
    for (unsigned char c : heading) {
        if (c == ' ') slug += '-';
        else if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80) slug += static_cast<char>(std::tolower(c));
    }
    return slug;
}

// Lines outside ``` fences, with their 1-based numbers.
std::vector<std::pair<int, std::string>> prose_lines(const std::string& text) {
    std::vector<std::pair<int, std::string>> lines;
    std::istringstream in(text);
    std::string line;
    bool fenced = false;
    for (int n = 1; std::getline(in, line); ++n) {
        const auto first = line.find_first_not_of(' ');
        if (first != std::string::npos && line.compare(first, 3, "```") == 0) { fenced = !fenced; continue; }
        if (!fenced) lines.emplace_back(n, line);
    }
    return lines;
}

// The anchors of a Markdown text's headings (a repeated heading gets -1, -2, ... as on GitHub).
std::vector<std::string> anchors(const std::string& text) {
    std::vector<std::string> out;
    std::map<std::string, int> seen;
    static const std::regex heading(R"(^#{1,6}\s+(.*?)\s*$)");
    for (const auto& [n, line] : prose_lines(text)) {
        std::smatch m;
        if (!std::regex_match(line, m, heading)) continue;
        std::string slug = github_slug(m[1].str());
        const int k = seen[slug]++;
        out.push_back(k == 0 ? slug : slug + "-" + std::to_string(k));
    }
    return out;
}

// Every broken link of `text`, the Markdown file at `path`: "path:line: link (why)".
std::vector<std::string> broken_links(const fs::path& path, const std::string& text) {
    std::vector<std::string> broken;
    static const std::regex code_span("`[^`]*`");
    static const std::regex link(R"(\]\(([^)\s]+)(\s+"[^"]*")?\))");
    for (const auto& [n, raw] : prose_lines(text)) {
        const std::string line = std::regex_replace(raw, code_span, "");
        for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
            const std::string target = (*it)[1].str();
            if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0) continue;
            const auto hash = target.find('#');
            const std::string file = target.substr(0, hash);
            const std::string anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
            const fs::path resolved = file.empty() ? path : path.parent_path() / file;
            const std::string where = path.string() + ":" + std::to_string(n) + ": " + target;
            if (!fs::exists(resolved)) { broken.push_back(where + " (no such file)"); continue; }
            if (anchor.empty()) continue;
            if (resolved.extension() != ".md") { broken.push_back(where + " (an anchor into a file that is not Markdown)"); continue; }
            const std::string target_text = file.empty() ? text : ember::test::read_file(resolved.string());
            const auto names = anchors(target_text);
            if (std::find(names.begin(), names.end(), anchor) == names.end())
                broken.push_back(where + " (no heading with that anchor in " + resolved.filename().string() + ")");
        }
    }
    return broken;
}

// Every repository path `text` names in backticks that does not exist: a span without spaces
// that starts with a top-level folder of the source tree (not a build folder, not bench/out/,
// where the benchmarks write), without a glob's '*'.
std::vector<std::string> missing_paths(const fs::path& root, const fs::path& path, const std::string& text) {
    std::vector<std::string> tops;
    for (const auto& e : fs::directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        if (e.is_directory() && name.rfind("build", 0) != 0 && name != ".git") tops.push_back(name + "/");
    }
    std::vector<std::string> missing;
    static const std::regex code_span("`([^`\\s]+)`");
    for (const auto& [n, line] : prose_lines(text)) {
        for (std::sregex_iterator it(line.begin(), line.end(), code_span), end; it != end; ++it) {
            const std::string p = (*it)[1].str();
            const bool in_repo = std::any_of(tops.begin(), tops.end(), [&](const std::string& t) { return p.rfind(t, 0) == 0; });
            if (!in_repo || p.rfind("bench/out", 0) == 0 || p.find('*') != std::string::npos) continue;
            if (!fs::exists(root / p)) missing.push_back(path.string() + ":" + std::to_string(n) + ": " + p);
        }
    }
    return missing;
}

}  // namespace

TEST_CASE("docs: the link checker finds a missing file, a missing anchor and an anchor of a repeated heading") {
    const fs::path readme = fs::path(ember::test::source_dir()) / "README.md";
    const std::string text =
        "# Title\n## Speed (`bench`, 2 threads)\n## Speed (`bench`, 2 threads)\n"
        "[a](#speed-bench-2-threads) [b](#speed-bench-2-threads-1) [c](#speed-bench-2-threads-2)\n"
        "![p](bench/llama_plot.png) [d](no/such/file.md) `[e](not/a/link.md)`\n"
        "```\n[f](inside/a/fence.md)\n```\n[g](https://example.org/x) [h](docs/testing.md#no-such-heading)\n";
    const auto broken = broken_links(readme, text);
    REQUIRE(broken.size() == 3);
    CHECK(broken[0].find("#speed-bench-2-threads-2 (no heading") != std::string::npos);
    CHECK(broken[1].find(":5: no/such/file.md (no such file)") != std::string::npos);
    CHECK(broken[2].find("docs/testing.md#no-such-heading (no heading") != std::string::npos);
    CHECK(github_slug("What the weights cannot tell (`--n-head`, `--rename`)") == "what-the-weights-cannot-tell---n-head---rename");
}

TEST_CASE("docs: every relative link and image of README.md and docs/*.md names a file and a heading that exist") {
    const fs::path root = ember::test::source_dir();
    std::vector<fs::path> files{root / "README.md"};
    for (const auto& e : fs::directory_iterator(root / "docs"))
        if (e.path().extension() == ".md") files.push_back(e.path());
    int links = 0;
    for (const auto& file : files) {
        const std::string text = ember::test::read_file(file.string());
        links += static_cast<int>(std::count(text.begin(), text.end(), ']'));
        for (const auto& b : broken_links(file, text)) FAIL_CHECK(b);
    }
    CHECK(files.size() >= 5);  // README.md and the four docs/ files were found
    CHECK(links > 20);         // and read
}

TEST_CASE("docs: every repository path README.md and docs/*.md name in backticks exists") {
    const fs::path root = ember::test::source_dir();
    const auto made_up = missing_paths(root, root / "README.md",
                                       "`bench/llama_plot.png` `tests/no_such_test.cpp` `bench/out/x.json` `tests/test_lora*.cpp` `DIR/NAME.ember`\n");
    REQUIRE(made_up.size() == 1);
    CHECK(made_up[0].find(":1: tests/no_such_test.cpp") != std::string::npos);
    std::vector<fs::path> files{root / "README.md"};
    for (const auto& e : fs::directory_iterator(root / "docs"))
        if (e.path().extension() == ".md") files.push_back(e.path());
    for (const auto& file : files)
        for (const auto& m : missing_paths(root, file, ember::test::read_file(file.string()))) FAIL_CHECK(m);
}
