// The file's dtype enum (schema/ember.fbs: fb::DType, what the bytes say) against the one enum
// the code uses (kernels::WType): the only place the two meet.
#pragma once

#include "ember_generated.h"
#include "kernels/cpu/weights.h"

namespace ember {

// fb::DType values other than F32, F16 and I8 are refused by Model::open before this is asked
// (a file's byte may hold any value); they map to I8 here.
inline kernels::WType wtype_of(fb::DType d) {
    return d == fb::DType::F32 ? kernels::WType::F32 : d == fb::DType::F16 ? kernels::WType::F16 : kernels::WType::I8;
}
inline fb::DType file_dtype(kernels::WType t) {
    return t == kernels::WType::F32 ? fb::DType::F32 : t == kernels::WType::F16 ? fb::DType::F16 : fb::DType::I8;
}

}  // namespace ember
