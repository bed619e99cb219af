#include "kern_a.h"
#include "codegen/low.h"
#include "kern_b.h"
