// The settings of a fine-tuning run, as `ember finetune` (cli/main.cpp, CLI11) and the
// console's `finetune` (firmware/console_parser.cpp) take them: one table, which both parsers
// are built from, so that their names, ranges and messages cannot drift apart.
//
//   --steps N          0 .. 2^30                  total optimizer steps (a resumed run goes on up to N)
//   --eval-every K     1 .. 2^30                  validation loss and an adapter checkpoint every K steps
// and the run's settings, which an adapter's training state holds (--resume takes them from it):
//   --rank R           1 .. 65536                 LoRA rank r
//   --alpha A          finite, > 0                LoRA alpha (the update's scale is alpha / r)
//   --batch B          1 .. 4096                  sequences per step
//   --seq T            0 .. 2^20, 0 = block_size  tokens per sequence
//   --seed S           0 .. 2^64-1                adapter initialization and data order
//   --lr LR            finite, > 0                AdamW learning rate
//   --weight-decay W   finite, >= 0               AdamW decoupled weight decay
//   --clip C           finite, >= 0, 0 = off      max gradient norm
// Defaults: FinetuneOptions (runtime/finetune.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/finetune.h"

namespace ember {

enum class FinetuneOption { Steps, EvalEvery, Rank, Alpha, Batch, Seq, Seed, Lr, WeightDecay, Clip };

struct FinetuneOptionSpec {
    FinetuneOption id;
    const char* name;   // "--steps"
    const char* value;  // the value's name in help: "N"
    bool setting;       // fixed by an adapter's training state (--resume takes it from the file)
    const char* help;
};

inline constexpr std::array<FinetuneOptionSpec, 10> kFinetuneOptions{{
    {FinetuneOption::Steps, "--steps", "N", false, "total optimizer steps, 0..2^30 (a resumed run goes on up to N)"},
    {FinetuneOption::EvalEvery, "--eval-every", "K", false, "validation loss and adapter checkpoint every K steps, 1..2^30"},
    {FinetuneOption::Rank, "--rank", "R", true, "LoRA rank r, 1..65536"},
    {FinetuneOption::Alpha, "--alpha", "A", true, "LoRA alpha, > 0 (the update's scale is alpha / r)"},
    {FinetuneOption::Batch, "--batch", "B", true, "sequences per step, 1..4096"},
    {FinetuneOption::Seq, "--seq", "T", true, "tokens per sequence, 0..2^20 (0 = block_size)"},
    {FinetuneOption::Seed, "--seed", "S", true, "adapter initialization and data order, 0..2^64-1"},
    {FinetuneOption::Lr, "--lr", "LR", true, "AdamW learning rate, > 0"},
    {FinetuneOption::WeightDecay, "--weight-decay", "W", true, "AdamW decoupled weight decay, >= 0"},
    {FinetuneOption::Clip, "--clip", "C", true, "max gradient norm, >= 0 (0 = off)"},
}};

// What a command line or a console line gives; unset = the default (FinetuneOptions').
struct FinetuneOverrides {
    std::optional<int64_t> steps;
    std::optional<int> eval_every;
    std::optional<int> rank;
    std::optional<float> alpha;
    std::optional<int> batch;
    std::optional<int> seq;
    std::optional<uint64_t> seed;
    std::optional<float> lr;
    std::optional<float> weight_decay;
    std::optional<float> clip;

    // Sets what is given into o.
    void apply(FinetuneOptions& o) const;
    // Whether any option with `setting` (the table) is given: --resume refuses them.
    bool settings_given() const;
};

// The option called `name` ("--lr"), or null.
const FinetuneOptionSpec* find_finetune_option(std::string_view name);
// Every option's name, for suggestions.
std::vector<std::string> finetune_option_names();
// The settings' names without dashes, for messages: "rank, alpha, batch, seq, seed, lr,
// weight-decay and clip".
std::string finetune_settings_text();
// The default of an option as help shows it ("300", "0.002").
std::string finetune_option_default(FinetuneOption id);

// Checks `value` for the option and stores it in o. Returns "" or the reason, one line naming
// the option ("--batch 5000 not in 1..4096", "--lr 0 must be > 0").
std::string parse_finetune_option(FinetuneOption id, std::string_view value, FinetuneOverrides& o);

}  // namespace ember
