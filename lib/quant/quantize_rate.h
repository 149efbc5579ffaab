// How fast a format quantizes here: weights per second of one thread,
// measured by timing the format's quantizer on a probe block of random
// weights. The rate depends on the machine and the device far more than on
// the matrix (the quantizers' cost is linear in the rows), so it is measured
// where it is used rather than stored with the format. On the CPU the
// thread's CPU time is measured, not the wall clock: a machine busy with other
// work while the probe runs must not make the prediction (which is for the
// machine, not for the moment) pessimistic.
#pragma once

#include <cstdint>

#include "quant/device.h"
#include "quant/format.h"

namespace eq::quant {

// The probe's rows for `cols` columns: a multiple of 16 (every format's row
// multiple) holding at least 4,096 weights, at most 256 rows.
int64_t rate_probe_rows(int64_t cols);

// Quantizes a [rate_probe_rows(cols), cols] block of random weights
// repeatedly (at least once, until about `min_seconds` have passed: CPU time
// of the thread on the CPU, wall time on a GPU) on `device` and returns
// weights per second of one thread. On the CPU every thread of the default
// pool quantizes at once, each in one thread, as pack runs one expert per
// thread; the rate is theirs while all are busy. `weighted`: with a per-column
// importance, as pack quantizes the routed experts of a profile (the trellis
// search then takes its slower, error-feedback path). `cols` must be a
// multiple of the format's col_multiple.
double measure_quantize_rate(const FormatTraits& format, int64_t cols, Device device, bool weighted,
                             double min_seconds = 0.02);

}  // namespace eq::quant
