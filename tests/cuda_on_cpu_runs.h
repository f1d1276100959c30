// The whole runs of the CPU-executed CUDA build's tests (docs/gpu.md "CUDA executed on the CPU"):
// five steps (expect_same_training's minimum) on 2 micro-batches of 2 x 32 tokens (two, so the
// pipeline has micro-batches to interleave), validation on 4 rows. Shapes are tiny: the emulator
// runs every GPU thread as a fiber.
#pragma once

namespace mt::testing {

inline constexpr const char* kCudaOnCpuRun =
    "--set train.steps=5 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=2 --set train.grad_accum=2 --set train.seq_len=32 "
    "--set train.eval_tokens=128 --set train.log_every=100 --set optim.warmup_steps=2 ";

}  // namespace mt::testing
