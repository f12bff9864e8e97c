// Umbrella header: everything a kernel author or host program needs.
#pragma once
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"
#include "tilejit/tile.h"
#include "tilejit/types.h"
