// `meshtrain shard` refuses the layouts `meshtrain train` refuses, with the same line (issue 34
// item 7): both call check_model_layout (train/run_layout.h). shard used to lay out tp=8 over the
// built-in model's 4 KV heads, interleaved pipeline stages without the micro-batches they need, and
// a sequence that 2 x cp does not divide, each of which train refuses.
#include <gtest/gtest.h>

#include <string>

#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

using testing::CommandResult;
using testing::fresh_temp_dir;
using testing::run_meshtrain;

// The output's "error: ..." line, or "" without one.
std::string error_line(const CommandResult& r) {
  const size_t at = r.output.find("error: ");
  if (at == std::string::npos) return "";
  return r.output.substr(at, r.output.find('\n', at) - at);
}

struct Case {
  const char* args;  // beside the built-in run (4 KV heads, train.grad_accum 1)
  const char* message;
};

TEST(ShardRefusesAsTrain, TheSameLayoutsWithTheSameLine) {
  const Case cases[] = {
      {"--mesh tp=8", "tensor parallelism: model.num_key_value_heads (4) is not divisible by tp=8"},
      {"--mesh pp=2 --set train.pp_virtual=2", "train.pp_virtual = 2 needs train.grad_accum (1 micro-batches) to be a multiple of mesh pp (2)"},
      {"--mesh cp=2 --set train.seq_len=90", "train.seq_len (90) must be divisible by 2 x cp (4)"},
  };
  const std::string out = fresh_temp_dir("shard_refuses_as_train");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult shard = run_meshtrain(std::string("shard ") + c.args);
    const CommandResult train = run_meshtrain(std::string("train --steps 1 --out ") + out + "/run " + c.args);
    EXPECT_NE(shard.code, 0) << shard.output;
    EXPECT_NE(train.code, 0) << train.output;
    EXPECT_NE(error_line(shard).find(c.message), std::string::npos) << shard.output;
    EXPECT_EQ(error_line(shard), error_line(train)) << train.output;
  }
  // What train lays out, shard lays out.
  const CommandResult ok = run_meshtrain("shard --mesh tp=4");
  EXPECT_EQ(ok.code, 0) << ok.output;
}

}  // namespace
}  // namespace mt
