// The lab entry points, one per file in labs/; registry.cpp lists them in the order `lab all`
// runs them.
#pragma once

#include "lab.h"

namespace flashlab::lab {

Report gradcheck(const LabOptions&);
Report memory(const LabOptions&);
Report cost(const LabOptions&);
Report causal(const LabOptions&);
Report bwd_ratio(const LabOptions&);
Report no_lse(const LabOptions&);
Report determinism(const LabOptions&);
Report hopper(const LabOptions&);
Report io(const LabOptions&);

}  // namespace flashlab::lab
