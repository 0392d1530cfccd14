// Output paths that must not be inputs: a command that writes over a file it reads destroys
// it (the rename replaces it, or training goes on from an mmap of a file no longer there).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ember {

// Throws ember::Error when `out` names the same file as one of `inputs` ({role, path}; a
// folder input also covers the GPT-2 tokenizer files inside it), through any spelling or
// link: "-o PATH is the ROLE (an input): writing it would destroy it; choose another output".
// Inputs that do not exist are skipped (their own reader reports them). `option` names the
// output's option in the message ("-o", "--png", "--log").
void check_output_not_input(const std::string& out, const std::vector<std::pair<std::string, std::string>>& inputs,
                            const char* option = "-o");

// The file a command that writes `out` atomically (a temporary beside it, then rename) must
// write and rename over: `out` itself, or, where `out` is a symbolic link to an existing file,
// that file (a rename over the link would replace the link and leave its target as it was).
// Throws ember::Error, naming `option` ("-o", "--log"), when `out` is empty, exists and is not
// a regular file (a device such as /dev/stdout, a FIFO, a folder: the rename would replace it,
// run as root the device node itself), exists and is read-only (no write bit) or may not be
// written by this process (the rename would replace it all the same), or is a link to nothing;
// and, when `out` does not exist yet, when its folder does not exist, is not a folder or may
// not be written ("... the folder F does not exist (create it first, e.g. mkdir -p F)").
std::string output_target(const std::string& out, const char* option = "-o");

// Writes all n bytes at p to fd, going on after short writes and EINTR. False with errno set
// on a failure: write()'s own, or EIO where it took nothing (0 for n > 0 would loop for good).
bool write_fully(int fd, const void* p, size_t n);

}  // namespace ember
