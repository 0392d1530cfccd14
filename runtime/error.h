// Errors across ember: one exception type that carries what went wrong and where.
// Library code throws ember::Error and never exits; only the commands (cli/, firmware/)
// turn an Error into a one-line message and an exit status.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
    os << first;
    append(os, rest...);
}
}  // namespace detail

// Builds a message from its parts: fail("tensor ", name, ": shape ", n, " != ", m).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    std::ostringstream os;
    detail::append(os, parts...);
    throw Error(os.str());
}

}  // namespace ember
