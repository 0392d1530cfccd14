// The file's enums (schema/ember.fbs: fb::DType, fb::Arch, fb::Activation: what the bytes say)
// against the ones the code uses (kernels::WType, Arch, kernels::ActivationKind): the only place
// they meet. The writer's direction is a switch with no default, so that a value added to the
// code's enum and not to the file's is a compiler warning (-Wswitch), not a wrong tag.
#pragma once

#include <optional>

#include "ember_generated.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/weights.h"
#include "runtime/model.h"

namespace ember {

// fb::DType values other than F32, F16 and I8 are refused by Model::open before this is asked
// (a file's byte may hold any value); they map to I8 here.
inline kernels::WType wtype_of(fb::DType d) {
    return d == fb::DType::F32 ? kernels::WType::F32 : d == fb::DType::F16 ? kernels::WType::F16 : kernels::WType::I8;
}
inline fb::DType file_dtype(kernels::WType t) {
    return t == kernels::WType::F32 ? fb::DType::F32 : t == kernels::WType::F16 ? fb::DType::F16 : fb::DType::I8;
}

inline fb::Arch file_arch(Arch a) {
    switch (a) {
    case Arch::GptPy: return fb::Arch::GptPy;
    case Arch::NanoGPT: return fb::Arch::NanoGPT;
    case Arch::HfGpt2: return fb::Arch::HfGpt2;
    }
    return fb::Arch::GptPy;  // not reached: every Arch is above
}
// A file's arch byte: nullopt for a value this build does not know (a newer file, a flipped byte).
inline std::optional<Arch> arch_of(fb::Arch a) {
    switch (a) {
    case fb::Arch::GptPy: return Arch::GptPy;
    case fb::Arch::NanoGPT: return Arch::NanoGPT;
    case fb::Arch::HfGpt2: return Arch::HfGpt2;
    }
    return std::nullopt;
}

inline fb::Activation file_activation(kernels::ActivationKind k) {
    switch (k) {
    case kernels::ActivationKind::ReLU: return fb::Activation::ReLU;
    case kernels::ActivationKind::GeluErf: return fb::Activation::GeluErf;
    case kernels::ActivationKind::GeluTanh: return fb::Activation::GeluTanh;
    }
    return fb::Activation::GeluTanh;  // not reached
}
inline std::optional<kernels::ActivationKind> activation_of(fb::Activation a) {
    switch (a) {
    case fb::Activation::ReLU: return kernels::ActivationKind::ReLU;
    case fb::Activation::GeluErf: return kernels::ActivationKind::GeluErf;
    case fb::Activation::GeluTanh: return kernels::ActivationKind::GeluTanh;
    }
    return std::nullopt;
}

}  // namespace ember
