#include "runtime/eval.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace ember {

namespace {

// The first NaN or infinity of a logit row [V].
std::string non_finite_name(const float* row, int V) {
    for (int v = 0; v < V; ++v) {
        if (std::isnan(row[v])) return "logit " + std::to_string(v) + " is nan";
        if (std::isinf(row[v])) return "logit " + std::to_string(v) + (row[v] > 0 ? " is +inf" : " is -inf");
    }
    return "a logit out of range";
}

}  // namespace

const char* non_finite_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "+inf" : "-inf"; }

void eval_loss_check(const EvalResult& r) {
    if (std::isfinite(r.loss)) return;
    fail("eval: the loss is ", non_finite_text(r.loss), ": the logits that predict token ", r.first_non_finite, " of the text evaluated are not finite (",
         r.non_finite_logit, "): the model's weights overflow f32");
}

int64_t val_split_start(int64_t n) { return static_cast<int64_t>(0.9 * static_cast<double>(n)); }

EvalResult evaluate(Session& session, const int* ids, int64_t n, int block_size, int vocab_size, int n_real) {
    if (n < 2) fail("eval needs at least 2 tokens, got ", n);
    const int V = n_real > 0 && n_real < vocab_size ? n_real : vocab_size;  // softmax over the real rows
    EvalResult r;
    double total = 0.0;
    for (int64_t start = 0; start + 1 < n; start += block_size) {
        const int T = static_cast<int>(std::min<int64_t>(block_size, n - 1 - start));
        const float* logits = session.forward_window(ids + start, T);
        for (int t = 0; t < T; ++t) {
            const float* row = logits + static_cast<size_t>(t) * vocab_size;
            const float mx = *std::max_element(row, row + V);
            double sum = 0.0;
            for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
            const double loss = std::log(sum) + mx - row[ids[start + t + 1]];
            if (!std::isfinite(loss) && r.first_non_finite < 0) {
                r.first_non_finite = start + t + 1;
                r.non_finite_logit = non_finite_name(row, V);
            }
            total += loss;
        }
        r.tokens += T;
    }
    r.loss = total / static_cast<double>(r.tokens);
    return r;
}

}  // namespace ember
