#include "codegen/common.h"
