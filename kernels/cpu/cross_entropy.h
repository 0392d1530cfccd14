// Mean cross-entropy over N rows of logits [N, V] with targets [N] in [0, V)
// (torch.nn.functional.cross_entropy, reduction 'mean'), and its gradient:
// d loss / d logits = (softmax(logits) - onehot(target)) / N.
#pragma once

namespace ember::kernels {

// Returns the mean loss (nats); overwrites logits with the gradient. Targets are trusted
// (the caller checked them). Double accumulation of the loss.
double cross_entropy_backward_ref(float* logits, const int* targets, int N, int V);
double cross_entropy_backward(float* logits, const int* targets, int N, int V);

}  // namespace ember::kernels
