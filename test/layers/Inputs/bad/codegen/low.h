/* 4.2 is below 4.3 */
#include "base/util.h"
