// Tapestry: everything a program needs, in one include.
#pragma once

#include "core/autograd.h"
#include "core/creation.h"
#include "core/device.h"
#include "core/gradcheck.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/radam.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
