// deepep: expert-parallel communication and collectives (see docs/deepep.md).
#pragma once

#include "deepep/buffer.h"
#include "deepep/collectives.h"
#include "deepep/comm.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "deepep/health.h"
#include "deepep/topology.h"
#include "deepep/transport.h"
