// The peak of a pipeline stage's own buffers (parallel::pipeline_buffers' peak_allocated),
// remembered: building every stage's schedule costs pp x micro-batches steps, and a layout search
// asks for the same (schedule, stages, stage, micro-batches, chunks) for every dp/fsdp split and
// checkpointing choice, which made a 1024-device search of a 405B model take 19 s.
#pragma once
#include <cstdint>

#include "parallel/pipeline.h"

namespace mt::plan {

int64_t pipeline_peak_buffers(parallel::PipelineSchedule schedule, int stages, int stage, int64_t micro,
                              int chunks);

}  // namespace mt::plan
