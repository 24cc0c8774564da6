// Umbrella header of the megrt embedding API.
#ifndef MEGRT_MEGRT_H
#define MEGRT_MEGRT_H

#include "megrt/DType.h"
#include "megrt/Error.h"
#include "megrt/FormatVersion.h"
#include "megrt/HalfFloat.h"
#include "megrt/Npy.h"
#include "megrt/Program.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"
#include "megrt/Tensor.h"

#endif // MEGRT_MEGRT_H
