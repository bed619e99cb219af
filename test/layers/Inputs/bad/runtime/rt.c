/* the runtime includes nothing of the compiler */
#include "ir/ir.h"
#include "base/util.h"
