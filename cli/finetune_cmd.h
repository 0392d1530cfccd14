// `ember finetune`: LoRA fine-tuning on a text (runtime/finetune.h), or with --merge, an
// adapter folded into a new .ember (converter/merge.h).
#pragma once

#include <string>

#include "runtime/finetune.h"

namespace ember::cli {

struct FinetuneArgs {
    std::string model;
    std::string text;
    std::string out;
    std::string resume;       // adapter to go on from
    std::string adapter;      // --merge: the adapter to fold in
    bool merge = false;
    bool skip_unknown = false;
    int log_every = 10;
    // --log FILE: CSV, a row per step: step,loss,val_loss,lr,tokens_per_s (val_loss empty where
    // not evaluated; the step-0 row holds the loss before training). Appended; the header is
    // written when the file is new or empty, so a --resume run goes on in the same log.
    std::string log;
    FinetuneOptions opts;
    bool settings_given = false;  // --rank/--alpha/--batch/--seq/--seed/--lr/... on the line
    std::string training_option;  // the first option given that only training uses (--merge refuses it), or ""
};

int cmd_finetune(const FinetuneArgs& a);

}  // namespace ember::cli
