// The help text of ember and ember-console: CLI11's, with an option's type written once.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ember::cli {

// CLI11 (2.1) joins an option's type and its check's name with ':' ("--threads INT:INT in
// [0 - 256]", "--name NAME:NAME"); this writes "--threads INT in [0 - 256]", "--name NAME".
// Set on the App before its subcommands are added, which inherit it.
class HelpFormatter : public CLI::Formatter {
public:
    std::string make_option_opts(const CLI::Option* opt) const override {
        std::string s = CLI::Formatter::make_option_opts(opt);
        const size_t colon = s.find(':');
        if (s.size() > 1 && s[0] == ' ' && colon != std::string::npos && colon > 1) {
            const std::string type = s.substr(1, colon - 1);
            if (type.find(' ') == std::string::npos && s.compare(colon + 1, type.size(), type) == 0) s.erase(1, type.size() + 1);
        }
        return s;
    }
};

}  // namespace ember::cli
