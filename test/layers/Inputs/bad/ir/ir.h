/* ir must not see the frontend */
#include <stdio.h>
#include "base/util.h"
#include "frontend/spec.h"
#include "generated.h"
