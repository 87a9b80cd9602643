// Tapestry: everything a program needs, in one include.
#pragma once

#include "core/autograd.h"
#include "core/creation.h"
#include "core/device.h"
#include "core/gradcheck.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
