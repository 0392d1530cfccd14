// The help text of ember and ember-console: CLI11's, with an option's type written once.
#pragma once

#include <CLI/CLI.hpp>

#include <cctype>
#include <regex>
#include <string>

namespace ember::cli {

// CLI11 (2.1) joins an option's type and its check's name with ':' ("--threads INT:INT in
// [0 - 256]", "--name NAME:NAME", "--log TEXT:FILE"); this writes "--threads INT in
// [0 - 256]", "--name NAME", "--log FILE".
// Set on the App before its subcommands are added, which inherit it.
class HelpFormatter : public CLI::Formatter {
public:
    std::string make_option_opts(const CLI::Option* opt) const override {
        std::string s = CLI::Formatter::make_option_opts(opt);
        const size_t colon = s.find(':');
        if (s.size() > 1 && s[0] == ' ' && colon != std::string::npos && colon > 1) {
            const std::string type = s.substr(1, colon - 1);
            if (type.find(' ') == std::string::npos && s.compare(colon + 1, type.size(), type) == 0) {
                s.erase(1, type.size() + 1);
            } else if (type == "TEXT" && colon + 1 < s.size() && std::isupper(static_cast<unsigned char>(s[colon + 1]))) {
                s.erase(1, type.size() + 1);  // "TEXT:FILE" (a check named FILE): "FILE"
            }
        }
        return s;
    }
};

// CLI11's parse errors in the words of ember's own parsers (runtime/gen_options.h):
//   "--threads: Failed parsing two as a INT"        -> "--threads: 'two' is not an integer"
//   "--runs: Value 0 not in range 1 to 1000"        -> "--runs 0 not in 1..1000"
//   "--seq: At Most 1 required but received 2"      -> "--seq given 2 times: give it once"
//   "A subcommand is required"                       -> "a subcommand is required"
// Any other message is returned as it is.
inline std::string plain_parse_error(const std::string& msg) {
    static const std::regex failed(R"(^(\S+): Failed parsing (.*) as a (INT|UINT|FLOAT|NUMBER)$)");
    static const std::regex range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
    static const std::regex at_most(R"(^(\S+): At Most 1 required but received (\d+)$)");
    std::smatch m;
    if (std::regex_match(msg, m, failed))
        return m[1].str() + ": '" + m[2].str() + "' is not " + (m[3] == "FLOAT" || m[3] == "NUMBER" ? "a number" : "an integer");
    if (std::regex_match(msg, m, range)) return m[1].str() + " " + m[2].str() + " not in " + m[3].str() + ".." + m[4].str();
    if (std::regex_match(msg, m, at_most)) return m[1].str() + " given " + m[2].str() + " times: give it once";
    if (msg == "A subcommand is required") return "a subcommand is required";
    return msg;
}

}  // namespace ember::cli
