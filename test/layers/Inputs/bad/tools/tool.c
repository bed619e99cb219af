#include "codegen/kern_a.h"
#include "../orphan/lost.h"
