#include "cli/attn_png.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"
#include "runtime/paths.h"
#include "runtime/utf8.h"

namespace ember::cli {

namespace {

// libgd's font record (gd.h's gdFont, the same layout since gd 1.x): nchars glyphs from byte
// `offset`, each w x h bytes, one per pixel (non-zero: ink). Declared here so that building
// needs no libgd headers; the library itself is opened at run time (small_font below).
struct gdFont {
    int nchars;
    int offset;
    int w;
    int h;
    char* data;
};

constexpr int kMaxLabelChars = 10;  // longer labels are cut

struct Rgb {
    uint8_t r, g, b;
};

// An RGB raster [height, width], white.
class Canvas {
public:
    Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<size_t>(w) * h * 3, 255) {}
    void set(int x, int y, Rgb c) {
        if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
        uint8_t* p = &px_[(static_cast<size_t>(y) * w_ + x) * 3];
        p[0] = c.r;
        p[1] = c.g;
        p[2] = c.b;
    }
    void fill(int x0, int y0, int w, int h, Rgb c) {
        for (int y = y0; y < y0 + h; ++y)
            for (int x = x0; x < x0 + w; ++x) set(x, y, c);
    }
    // Glyph of byte ch at (x, y), upright, or rotated a quarter turn counterclockwise (text read
    // upwards: (x, y) is then the glyph's bottom-left corner).
    void glyph(const gdFont& f, unsigned char ch, int x, int y, bool up, Rgb c) {
        if (ch < f.offset || ch >= f.offset + f.nchars) ch = '?';
        const char* g = f.data + static_cast<size_t>(ch - f.offset) * f.w * f.h;
        for (int gy = 0; gy < f.h; ++gy)
            for (int gx = 0; gx < f.w; ++gx)
                if (g[gy * f.w + gx]) up ? set(x + gy, y - gx, c) : set(x + gx, y + gy, c);
    }
    int width() const { return w_; }
    int height() const { return h_; }
    const uint8_t* data() const { return px_.data(); }

private:
    int w_, h_;
    std::vector<uint8_t> px_;
};

// gd's 6x13 font (gdFontGetSmall). libgd is opened here, at the first --png, not linked: it
// pulls in about 50 libraries (X11, image codecs) that every other `ember` command would load
// at start-up otherwise. Never closed: the font's data is used until the process ends.
const gdFont& small_font() {
    void* lib = dlopen("libgd.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) fail("attention png: the labels are drawn with libgd's built-in font, and libgd.so.3 cannot be loaded (", dlerror(),
                   "); install libgd3 (Debian: apt-get install libgd3)");
    using GetFont = gdFont* (*)();
    auto get = reinterpret_cast<GetFont>(dlsym(lib, "gdFontGetSmall"));
    const gdFont* f = get ? get() : nullptr;
    if (!f || !f->data || f->w <= 0 || f->h <= 0) fail("attention png: libgd.so.3 has no usable gdFontGetSmall");
    return *f;
}

// The label's characters as glyph bytes: printable ASCII as it is, anything else '?'; cut.
std::string glyphs(const std::string& label) {
    std::string out;
    size_t pos = 0;
    uint32_t cp = 0;
    while (pos < label.size() && static_cast<int>(out.size()) < kMaxLabelChars) {
        const size_t at = pos;
        if (!utf8_next(label, pos, cp)) {  // token_label escapes such bytes; kept safe anyway
            pos = at + 1;
            cp = '?';
        }
        out += cp >= 0x20 && cp < 0x7f ? static_cast<char>(cp) : '?';
    }
    return out;
}

Rgb shade(float w) {
    const float t = std::clamp(w, 0.0f, 1.0f);
    auto mix = [t](int a, int b) { return static_cast<uint8_t>(std::lround(a + (b - a) * t)); };
    return {mix(255, 8), mix(255, 48), mix(255, 107)};
}

struct Layout {
    int cell, step, label_px, title_px, pad, panel_w, panel_h;
};

Layout layout(const gdFont& f, int T, int label_chars) {
    Layout l;
    l.cell = T <= 64 ? 14 : std::max(1, 896 / T);  // a panel of at most ~900 px, 1 px cells from T = 449 on
    l.step = (f.h + l.cell - 1) / l.cell;  // a label every step-th row and column
    l.label_px = label_chars * f.w + 4;
    l.title_px = f.h + 6;
    l.pad = 12;
    l.panel_w = l.pad + l.label_px + T * l.cell + l.pad;
    l.panel_h = l.title_px + l.label_px + T * l.cell + l.pad;
    return l;
}

void draw_panel(Canvas& cv, const gdFont& f, const Layout& l, int x0, int y0, const AttentionWeights& w, int h,
                const std::vector<std::string>& labels) {
    const Rgb ink{0, 0, 0}, masked{232, 232, 232};
    const std::string title = "layer " + std::to_string(w.layer) + " head " + std::to_string(h);
    for (size_t i = 0; i < title.size(); ++i) cv.glyph(f, title[i], x0 + l.pad + static_cast<int>(i) * f.w, y0 + 3, false, ink);
    const int gx = x0 + l.pad + l.label_px, gy = y0 + l.title_px + l.label_px;
    const int T = w.T;
    const float* wei = w.head(h);
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < T; ++j) cv.fill(gx + j * l.cell, gy + t * l.cell, l.cell, l.cell, j > t ? masked : shade(wei[static_cast<size_t>(t) * T + j]));
    for (int t = 0; t < T; t += l.step) {
        const std::string g = glyphs(labels[t]);
        const int n = static_cast<int>(g.size());
        const int off = (l.cell - f.h) / 2;
        for (int i = 0; i < n; ++i) {  // row t: right-aligned left of the grid
            cv.glyph(f, g[i], gx - 3 - (n - i) * f.w, gy + t * l.cell + off, false, ink);
            cv.glyph(f, g[i], gx + t * l.cell + off, gy - 3 - i * f.w, true, ink);  // column t: upwards from the grid
        }
    }
}

// bytes to path. A regular file (or a new one) is written to path.tmp-PID and renamed over
// it, so a failure leaves what was there (its mode is not kept: the picture is 0644 less
// umask); anything else that exists (a device, a FIFO) is written in place, never removed.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    const std::string f = printable(path, 200);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail("cannot write ", f, ": is a directory");
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) fail("cannot write ", f, ": ", std::strerror(errno));
        const bool ok = write_fully(fd, bytes.data(), bytes.size());
        const int e = errno;
        if (::close(fd) != 0 || !ok) fail("cannot write ", f, ": ", std::strerror(ok ? errno : e));
        return;
    }
    // An existing file: written only if it may be (a rename would replace a read-only one, and
    // root passes access()), and through a link into its target (the rename would replace the
    // link): output_target, as -o is.
    const std::string target = ::stat(path.c_str(), &st) == 0 ? output_target(path, "--png") : path;
    const std::string tmp = target + ".tmp-" + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    // Named: the file itself may be there and writable (/proc/version said "No such file").
    if (fd < 0) fail("cannot write ", f, ": cannot create its temporary ", printable(tmp, 200), ": ", std::strerror(errno));
    // On disk before the rename, as the model and the adapter are: a crash then leaves the old
    // picture or the new one, never an empty file.
    const bool ok = write_fully(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
    const int e = errno;
    const bool closed = ::close(fd) == 0;
    if (!ok || !closed) {
        const int err = ok ? errno : e;
        ::unlink(tmp.c_str());
        fail("cannot write ", f, ": ", std::strerror(err));
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot write ", f, ": ", std::strerror(err));
    }
}

}  // namespace

void write_attention_png(const std::string& path, const AttentionWeights& w, const std::vector<int>& heads,
                         const std::vector<std::string>& labels, bool to_stdout) {
    if (static_cast<int>(labels.size()) != w.T) fail("attention png: ", labels.size(), " labels for ", w.T, " tokens");
    if (heads.empty()) fail("attention png: no head to draw");
    for (int h : heads)
        if (h < 0 || h >= w.n_head) fail("attention png: head ", h, " is outside [0, ", w.n_head, ")");
    const gdFont& f = small_font();
    int label_chars = 1;
    for (const std::string& s : labels) label_chars = std::max(label_chars, static_cast<int>(glyphs(s).size()));
    const Layout l = layout(f, w.T, label_chars);
    const int n = static_cast<int>(heads.size());
    const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
    const int rows = (n + cols - 1) / cols;
    Canvas cv(cols * l.panel_w, rows * l.panel_h);
    for (int i = 0; i < n; ++i) draw_panel(cv, f, l, (i % cols) * l.panel_w, (i / cols) * l.panel_h, w, heads[i], labels);

    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = static_cast<png_uint_32>(cv.width());
    img.height = static_cast<png_uint_32>(cv.height());
    img.format = PNG_FORMAT_RGB;
    // Encoded in memory, then written by write_file: png_image_write_to_file removes the path
    // when a write fails, which deleted an existing picture (and, run as root, /dev/full).
    png_alloc_size_t size = 0;
    if (!png_image_write_get_memory_size(img, size, 0, cv.data(), cv.width() * 3, nullptr))
        fail("attention png: cannot encode ", printable(path, 200), ": ", img.message);
    std::vector<uint8_t> bytes(size);
    if (!png_image_write_to_memory(&img, bytes.data(), &size, 0, cv.data(), cv.width() * 3, nullptr))
        fail("attention png: cannot encode ", printable(path, 200), ": ", img.message);
    bytes.resize(size);
    if (!to_stdout) return write_file(path, bytes);
    if (!write_fully(STDOUT_FILENO, bytes.data(), bytes.size())) fail("cannot write ", printable(path, 200), ": ", std::strerror(errno));
}

}  // namespace ember::cli
