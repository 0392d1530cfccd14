// `ember attn --png`: attention weights as a heatmap picture. One panel per head, titled
// "layer L head H"; cell (t, j) is query t's weight on key j, white (0) to dark blue (1),
// linear; the masked cells above the diagonal are light grey. The tokens label the rows
// (queries, left) and the columns (keys, top, read upwards), every one while a cell is at
// least as tall as the font (13 px), else every k-th. Several heads form a grid of
// ceil(sqrt(H)) columns. Glyphs: libgd's built-in 6x13 bitmap font (gdFontGetSmall, from
// X11's misc-fixed; libgd.so.3 is opened at the first call, and its absence is an error naming it); characters outside printable ASCII are drawn as '?'. Encoding: libpng's
// simplified API (png_image_write_to_memory), 8-bit RGB; a regular file is written through a
// temporary file renamed over it, so a failed write leaves the old file.
#pragma once

#include <string>
#include <vector>

#include "runtime/attention_probe.h"

namespace ember::cli {

// heads: indices into w (each in [0, n_head)); labels [T] (token_label). to_stdout: path is
// standard output (cmd_attn found it so): the bytes go to file descriptor 1 as they are, which
// keeps `>>`'s appending and works on a socket. Throws ember::Error naming the path when the
// file cannot be written (libpng's message).
void write_attention_png(const std::string& path, const AttentionWeights& w, const std::vector<int>& heads,
                         const std::vector<std::string>& labels, bool to_stdout = false);

}  // namespace ember::cli
