/* a spec may include ir (layer 2 -> 1) */
#include "ir/ir.h"
#include "../base/util.h"
