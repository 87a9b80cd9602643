#pragma once

// Marks functions that both backends evaluate: elementwise functors, Philox, index math.
#ifdef __CUDACC__
#define TP_HOST_DEVICE __host__ __device__
#else
#define TP_HOST_DEVICE
#endif
